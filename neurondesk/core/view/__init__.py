"""What the views read: one immutable ``RunView`` per frame (run_view.py), built here from the reduced
state and a clock reading, holding every figure and every piece of run data a view shows. The console's
panels, the headless status line and the summary screen render it; none computes a figure, caches one
or reaches into the reducers. ``Pulse`` (pulse.py) is the little a viewer reads at every poll to
decide whether a frame is due."""
