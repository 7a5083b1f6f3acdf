"""Op definitions: TF1 dataflow control flow (Switch, Merge, Enter, Exit, NextIteration, LoopCond).

These ops only make sense under the frame-aware executor (``runtime.dataflow_executor``): a Switch
leaves one output dead, a Merge fires on whichever input is live, Enter/Exit/NextIteration move a
tensor between loop frames and iterations. They are marked stateful because their outputs depend on
that executor state, not only on their input values: graph rewrites must neither fold them into
constants nor merge two of them.
"""

from __future__ import annotations

from runtime.ops.registry import define

# Ops whose presence in a pruned graph sends it to the dataflow executor.
DATAFLOW_OPS = frozenset(
    {
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "LoopCond",
        "ControlTrigger",
    }
)

# Each TF1 control-flow role, with its ref-typed twin.
SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})
ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})

for _prefix in ("", "Ref"):
    define(f"{_prefix}Switch", inputs="data, pred", outputs="output_false, output_true",
           stateful=True)
    define(f"{_prefix}Merge", inputs="inputs*N", outputs="output, value_index", stateful=True)
    define(
        f"{_prefix}Enter",
        inputs="data",
        outputs="output",
        attrs={"is_constant": False, "parallel_iterations": 10},
        stateful=True,
    )
    define(f"{_prefix}Exit", inputs="data", outputs="output", stateful=True)
    define(f"{_prefix}NextIteration", inputs="data", outputs="output", stateful=True)

define("LoopCond", inputs="input", outputs="output", stateful=True)
define("ControlTrigger", stateful=True)
