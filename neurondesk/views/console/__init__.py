"""The Textual console: panels that render a RunState fed by a live session or a replay.

Nothing here imports torch; widgets render what RunState (and core's pure functions) say.
"""
