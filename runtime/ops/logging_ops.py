"""Op definitions: checks and printing (Assert, Print, PrintV2) and StringFormat, which builds
the text ``tf.print`` hands to PrintV2.

Assert, Print and PrintV2 are stateful, as TensorFlow registers them: their effect (a failed run,
a line of output) is the point, so the optimizer never folds, merges or drops them. A graph
usually reaches an Assert only through a control edge (``tf.control_dependencies``), which keeps
it in every plan that needs the guarded tensor.
"""

from __future__ import annotations

from runtime.ops.registry import define

define("Assert", inputs="condition, data*T", attrs={"summarize": 3}, stateful=True)
define(
    "Print",
    inputs="input, data*U",
    outputs="output",
    attrs={"message": "", "first_n": -1, "summarize": 3},
    stateful=True,
)
define("PrintV2", inputs="input", attrs={"output_stream": "stderr", "end": "\n"}, stateful=True)
define(
    "StringFormat",
    inputs="inputs*T",
    outputs="output",
    attrs={"template": "%s", "placeholder": "%s", "summarize": 3},
)
