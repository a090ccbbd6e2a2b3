"""The compile reducers: every compile and recompile with its cause (compiles, compile_causes,
compile_record), TorchNeuron's graph_stats rows and dynamo metrics joined to them (graph_stats) and
TorchNeuron's eager NEFF compiles grouped per step and cause (neff)."""
