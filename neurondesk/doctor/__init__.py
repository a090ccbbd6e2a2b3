"""`neurondesk doctor`: is this machine ready to train on Neuron, in one pass, before the first compile.

Each check is a small typed ``Check`` (ok, warn, fail or skip; what it found; what to do). The facts
come from the files and tools of the machine (``/dev``, ``/sys``, ``/proc``, ``neuron-ls``,
``dpkg-query`` or ``rpm``) and from the workload's own interpreter, asked in a subprocess with a
timeout: neurondesk never imports torch or the user's packages. Nothing here imports Textual.
"""

from neurondesk.doctor.check import Check, exit_code

__all__ = ["Check", "exit_code"]
