"""The focused reducers RunState is composed of (see core/reduce/state.py).

Each one owns its slice of the state and the handlers for the kinds it reduces; none does I/O or
reads the clock. They read each other only in one direction, fixed at construction:

    run        RunReducer       the run itself: command, options, price, config, exit
    procs      ProcessReducer   workload processes, the lead process, its device
    steps      StepReducer      steps, throughput, steady state and its quantiles, probe drops
    loss       LossReducer      loss values and the target            (reads run, steps)
    compiles   CompileReducer   compiles from four sources, dynamo reasons, graph breaks, recompiles
                                per phase                    (reads run, procs, steps, evaluation)
    telemetry  TelemetryReducer device & host samples, steady utilisation and FLOPs
                                                                       (reads run, steps, compiles)
    log        LogReducer       output lines, notices, errors, parse problems
    evaluation EvalReducer      evaluation phases: their own time, batches and compiles (reads procs)
    ranks      RankReducer      every rank: its steps, presync, stragglers, the rank that failed first
                                                                       (reads run)
"""

from neurondesk.core.reduce.compile.compiles import CompileRecord, CompileReducer
from neurondesk.core.reduce.evaluation import EvalReducer
from neurondesk.core.reduce.log import LogReducer
from neurondesk.core.reduce.loss import LossReducer
from neurondesk.core.reduce.processes import ProcessReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import SplitPoint, StepRecord, StepReducer
from neurondesk.core.reduce.telemetry import TelemetryReducer

__all__ = [
    "CompileRecord",
    "CompileReducer",
    "EvalReducer",
    "LogReducer",
    "LossReducer",
    "ProcessReducer",
    "RunReducer",
    "SplitPoint",
    "StepRecord",
    "StepReducer",
    "TelemetryReducer",
]
