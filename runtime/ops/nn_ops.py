"""Op definitions: nn_ops (matrix products, convolution, pooling, normalization, activations).

Argument names, order and attr defaults follow TensorFlow's registrations in
``tensorflow/core/ops/{math,nn,linalg}_ops.cc``; the ``_Fused*`` ops are the internal ones that
graph rewriting emits.
"""

from __future__ import annotations

from runtime.dtypes import DataType
from runtime.ops.registry import define

_F32 = DataType.DT_FLOAT
_I32 = DataType.DT_INT32
# TensorFlow's default epsilon and leaky-relu alpha are float32 values (1e-4 and 0.2).
_EPSILON = 0.0001
_ALPHA = 0.2

# --- matrix products --------------------------------------------------------------------------
define("MatMul", inputs="a, b", outputs="product",
       attrs={"transpose_a": False, "transpose_b": False, "grad_a": False, "grad_b": False})
_BATCH_MATMUL = {"adj_x": False, "adj_y": False, "grad_x": False, "grad_y": False}
define("BatchMatMul", inputs="x, y", outputs="output", attrs=_BATCH_MATMUL)
define("BatchMatMulV2", inputs="x, y", outputs="output", attrs=_BATCH_MATMUL)
define("BatchMatMulV3", inputs="x, y", outputs="output", attrs=_BATCH_MATMUL)
define("Einsum", inputs="inputs*N", outputs="output")
define("_FusedMatMul", inputs="a, b, args*num_args", outputs="product",
       attrs={"transpose_a": False, "transpose_b": False, "fused_ops": [],
              "epsilon": _EPSILON, "leakyrelu_alpha": _ALPHA})

# --- bias ------------------------------------------------------------------------------------
define("BiasAdd", inputs="value, bias", outputs="output", attrs={"data_format": "NHWC"})
define("BiasAddV1", inputs="value, bias", outputs="output")

# --- convolution -----------------------------------------------------------------------------
_CONV = {"explicit_paddings": [], "data_format": "NHWC", "dilations": [1, 1, 1, 1]}
define("Conv2D", inputs="input, filter", outputs="output",
       attrs={**_CONV, "use_cudnn_on_gpu": True})
define("DepthwiseConv2dNative", inputs="input, filter", outputs="output", attrs=_CONV)
define("Conv2DBackpropInput", inputs="input_sizes, filter, out_backprop", outputs="output",
       attrs={**_CONV, "use_cudnn_on_gpu": True})
define("_FusedConv2D", inputs="input, filter, args*TArgs, host_args*num_host_args",
       outputs="output",
       attrs={**_CONV, "num_host_args": 0, "filter_format": "HWIO", "use_cudnn_on_gpu": True,
              "fused_ops": [], "epsilon": _EPSILON, "leakyrelu_alpha": _ALPHA})
define("_FusedDepthwiseConv2dNative", inputs="input, filter, args*num_args", outputs="output",
       attrs={"data_format": "NHWC", "dilations": [1, 1, 1, 1], "fused_ops": [],
              "epsilon": _EPSILON, "leakyrelu_alpha": _ALPHA})
# This runtime's own: a transposed convolution with its BiasAdd and activation (TensorFlow has
# no fused form of Conv2DBackpropInput); the optimizer forms it.
define("_FusedConv2DBackpropInput", inputs="input_sizes, filter, out_backprop, args*num_args",
       outputs="output",
       attrs={**_CONV, "use_cudnn_on_gpu": True, "fused_ops": [], "epsilon": _EPSILON,
              "leakyrelu_alpha": _ALPHA})

# This runtime's own: a depthwise convolution (strides, padding and dilations are its) and the
# 1x1 convolution that reads it, each with its BiasAdd and activation, computed a chunk of rows
# at a time; ``runtime.optimize.separable`` forms it.
define("_FusedSeparableConv2D",
       inputs="input, depthwise_filter, depthwise_args*num_depthwise_args, filter, args*num_args",
       outputs="output",
       attrs={**_CONV, "depthwise_fused_ops": [], "fused_ops": [], "leakyrelu_alpha": _ALPHA})

# --- pooling ---------------------------------------------------------------------------------
define("MaxPool", inputs="input", outputs="output",
       attrs={"T": _F32, "explicit_paddings": [], "data_format": "NHWC"})
define("MaxPoolV2", inputs="input, ksize, strides", outputs="output",
       attrs={"T": _F32, "data_format": "NHWC"})
define("AvgPool", inputs="value", outputs="output", attrs={"data_format": "NHWC"})

# --- batch normalization ---------------------------------------------------------------------
_BATCH_NORM = {"epsilon": _EPSILON, "exponential_avg_factor": 1.0, "data_format": "NHWC",
               "is_training": True}
_BN_OUTPUTS = "y, batch_mean, batch_variance, reserve_space_1, reserve_space_2"
define("FusedBatchNorm", inputs="x, scale, offset, mean, variance", outputs=_BN_OUTPUTS,
       attrs=_BATCH_NORM)
define("FusedBatchNormV2", inputs="x, scale, offset, mean, variance", outputs=_BN_OUTPUTS,
       attrs=_BATCH_NORM)
define("FusedBatchNormV3", inputs="x, scale, offset, mean, variance",
       outputs=_BN_OUTPUTS + ", reserve_space_3", attrs=_BATCH_NORM)
define("_FusedBatchNormEx",
       inputs="x, scale, offset, mean, variance, side_input*num_side_inputs",
       outputs=_BN_OUTPUTS + ", reserve_space_3",
       attrs={**_BATCH_NORM, "num_side_inputs": 0, "activation_mode": "Identity"})

# --- local response normalization (TF1 image models: AlexNet, GoogLeNet v1) --------------------
define("LRN", inputs="input", outputs="output",
       attrs={"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5, "T": _F32})

# --- softmax and activations -----------------------------------------------------------------
define("Softmax", inputs="logits", outputs="softmax")
define("LogSoftmax", inputs="logits", outputs="logsoftmax")
for _name in ("Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign"):
    define(_name, inputs="features", outputs="activations")
define("LeakyRelu", inputs="features", outputs="activations", attrs={"alpha": _ALPHA, "T": _F32})

# --- top-k -----------------------------------------------------------------------------------
define("TopK", inputs="input", outputs="values, indices", attrs={"sorted": True})
define("TopKV2", inputs="input, k", outputs="values, indices",
       attrs={"sorted": True, "Tk": _I32, "index_type": _I32})
define("InTopK", inputs="predictions, targets", outputs="precision", attrs={"T": _I32})
define("InTopKV2", inputs="predictions, targets, k", outputs="precision", attrs={"T": _I32})

del _name
