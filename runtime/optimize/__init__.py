"""Load-time graph rewrites for the serving graph.

Each pass is a pure function ``(graph, context) -> graph`` that must leave every protected tensor's
value unchanged (tests compare outputs with and without each pass). Protected tensors are the
signature inputs and outputs: they stay feedable and fetchable under their original names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.graph import Graph, TensorRef
from runtime.optimize.context import SERVING_PIPELINE, Pass, PassContext, run_passes
from runtime.optimize.controls import drop_constant_controls
from runtime.optimize.cse import eliminate_common_subexpressions
from runtime.optimize.embedding import fuse_embedding_lookups
from runtime.optimize.fold_affine import fold_affine
from runtime.optimize.folding import fold_constants
from runtime.optimize.freeze import freeze_variables
from runtime.optimize.function_bodies import specialize_function_bodies
from runtime.optimize.fusion import fuse_patterns
from runtime.optimize.identity import remove_identities
from runtime.optimize.input_affine import fold_affine_into_consumer, move_affine_past_max_pool
from runtime.optimize.layer_norm import fuse_layer_norm
from runtime.optimize.pad_into_conv import fold_pads_into_convs
from runtime.optimize.prune import prune_to_protected
from runtime.optimize.repeat import fuse_repeats
from runtime.optimize.reshape import reshape_by_template
from runtime.optimize.separable import fuse_separable_convs
from runtime.optimize.split_bias import move_bias_before_split
from runtime.optimize.tensordot import simplify_tensordot
from runtime.resources import ResourceManager

# Order matters: freezing turns variable reads into constants that folding can then see through,
# and leaves control edges on those constants, which go before identities are removed. The Keras
# pattern rewrites (tensordot, shape-derived reshapes, embedding lookups, split biases, layer norm)
# need folded constants and hand fusion the MatMul/BatchMatMulV2 + BiasAdd form it looks for, as
# affine folding does for convolutions (batch norm's scale and shift are folded by then). What
# affine folding leaves (a batch norm after an activation) then moves past a max pool and into the
# next linear op's weights where it can, leaving that op a bias that a second round of affine
# folding merges with its own. Zero pads fold into the convolutions after that (input affine
# folding needs a convolution that reads no padding); fusion runs last, on the smallest graph,
# and a fused depthwise convolution then joins the 1x1 convolution that reads it.
# The tensordot and repeat rewrites read the shape subgraphs that the reshape rewrite removes, so
# they go first. Control-flow bodies are specialised and
# optimized with these same passes: once before freezing (binding variable handles, so that
# freezing sees loops only read them) and once after folding (binding the constants it made).
DEFAULT_PASSES: tuple[tuple[str, Pass], ...] = (
    ("prune", prune_to_protected),
    ("specialize_function_bodies", specialize_function_bodies),
    ("freeze_variables", freeze_variables),
    ("drop_constant_controls", drop_constant_controls),
    ("remove_identities", remove_identities),
    ("fold_constants", fold_constants),
    ("cse", eliminate_common_subexpressions),
    ("specialize_function_bodies_again", specialize_function_bodies),
    ("remove_identities_again", remove_identities),
    ("simplify_tensordot", simplify_tensordot),
    ("fuse_repeats", fuse_repeats),
    ("reshape_by_template", reshape_by_template),
    ("fuse_embedding_lookups", fuse_embedding_lookups),
    ("move_bias_before_split", move_bias_before_split),
    ("fold_affine", fold_affine),
    ("move_affine_past_max_pool", move_affine_past_max_pool),
    ("fold_affine_into_consumer", fold_affine_into_consumer),
    ("fold_affine_again", fold_affine),
    ("fuse_layer_norm", fuse_layer_norm),
    ("fold_pads_into_convs", fold_pads_into_convs),
    ("fuse_patterns", fuse_patterns),
    ("fuse_separable_convs", fuse_separable_convs),
    ("prune_again", prune_to_protected),
)


def optimize_for_serving(
    graph: Graph,
    protected: Iterable[TensorRef],
    resources: ResourceManager,
    passes: Sequence[tuple[str, Pass]] = DEFAULT_PASSES,
) -> Graph:
    return run_passes(graph, protected, resources, passes)


# Function bodies are optimized with the serving passes, whatever a caller runs.
SERVING_PIPELINE.passes = DEFAULT_PASSES

__all__ = ["DEFAULT_PASSES", "Pass", "PassContext", "optimize_for_serving"]
