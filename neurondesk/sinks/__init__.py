"""Sinks: the run's figures written where a team already looks (TensorBoard, MLflow, Weights & Biases).

One interface (``sinks/base.py``: ``Sink``), one file a tool. A sink is fed ``Frame``s that the state's
own thread takes (``sinks/frames.py``: core's ``RunFigures`` and what the run has seen) and runs in a
thread of its own behind a bounded queue (``SinkRunner``): a slow, hanging or dead tool costs the
recorder nothing; what could not be sent is counted and said in one line. A sink imports core and its
tool's library only: never the recorder, a view, a collector or the store.
"""
