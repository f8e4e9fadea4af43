"""CNN training steps of every shape: long skips, residual adds, concatenations,
depthwise stacks and branches that merge.

The transformer generators build chains of identical blocks; these families build the
graphs that chains lack (each cited in its generator's docstring):

- :func:`fcn`: FCN-8s, a VGG backbone whose pool3 and pool4 outputs are scored and fused
  with the upsampled coarse scores (Long, Shelhamer and Darrell, CVPR 2015);
- :func:`unet`: U-Net, encoder levels joined to the decoder by long skips through
  concatenation (Ronneberger, Fischer and Brox, MICCAI 2015);
- :func:`resnet`: ResNet-10 to 152, residual adds (He, Zhang, Ren and Sun, CVPR 2016);
- :func:`densenet`: DenseNet-BC, every feature map read by every later layer of its block
  (Huang, Liu, van der Maaten and Weinberger, CVPR 2017);
- :func:`mobilenet`: MobileNetV2, inverted residuals of pointwise and depthwise
  convolutions (Sandler, Howard, Zhu, Zhmoginov and Chen, CVPR 2018);
- :func:`branches`: seeded random cells of 2 to ``max_branches`` branches that merge by an
  add or a concatenation, with skips from earlier cells (the multi-branch cells of
  Inception, Szegedy et al. CVPR 2015, and of NAS cells, Zoph et al. CVPR 2018).

Every family is registered in :data:`slackopt.workloads.WORKLOADS` as ``shapes-<family>``
(``slackopt make shapes-resnet --layers 50 --batch 16 -o r50.json``).

Operator model (docs/workloads.md, "Operator conventions"; every op timed by
:func:`slackopt.hardware.roofline_s`; units bytes, FLOPs, seconds; elements of the GPU's
training dtype unless ``dtype_bytes`` is given):

- A k x k convolution (stride s, g groups, "same" padding) costs 2 B H_o W_o k^2 (C_in /
  g) C_out FLOPs at 75% of peak, bytes = input + output + weights; a depthwise one comes
  out memory-bound from the same roofline. A transposed convolution (FCN's and U-Net's
  upsampling) costs 2 B H_in W_in k^2 C_in C_out. A fully connected layer is a 1 x 1
  convolution on a 1 x 1 map. Backward: ``.dgrad`` and ``.wgrad``, each with the forward
  FLOPs and bytes; the wgrad reads the input, so a convolution's input is saved; no
  ``.dgrad`` for a convolution reading the image.
- Memory-bound ops at 85% of HBM, charged bytes read plus written: BatchNorm 2x its
  output forward, 3x backward (it reads its input: the convolution's output is saved);
  ReLU (ReLU6 in MobileNetV2) 2x forward, 3x backward, applied in place as VGG's
  (:mod:`slackopt.workloads.vgg`): the op before it writes a temporary, the ReLU output is
  saved (its backward reads it), and a rebuild writes into the rebuilt tensor's own
  buffer; max pool in + out forward, 2 in + out backward (reads its input); average and
  global average pool in + out both ways (reads no activation); add: inputs + output;
  concatenation (U-Net): inputs + output. Softmax cross-entropy reads the logits; its
  backward reads them and writes their gradient.
- Gradients, as PyTorch's autograd moves them: an add or a concatenation passes its
  output's gradient to its inputs without a kernel (a concatenation's inputs get views
  of it, so the whole buffer lives until the last of them is consumed), an in-place
  ReLU's backward overwrites its incoming gradient, every other backward op writes its
  input's gradient. Where a tensor has several forward readers, the first backward op
  that reaches it writes its gradient and later ones accumulate into it (a fused
  accumulation; an explicit ``.acc`` add where a pass-through gradient meets an
  existing one).
- Memory (docs/model.md, "Transient buffers"): every tensor lives from its producer's
  start to its last reader's end; workspaces are 0; the loss backward allocates the
  logits' gradient; no dropout is modelled (as VGG's).

Recipes (docs/model.md, "Recompute recipes"): a saved tensor is rebuilt by re-running its
producer from the saved tensors it reads, and the producers of the temporaries in between
(at most :data:`MAX_RECIPE_OPS` ops, as ``slackopt profile``); a temporary that is not
the rebuilt tensor's own buffer (an in-place ReLU writes into it) counts as
``transient_bytes``. The image has no recipe (it comes from the data loader). In the block
families (resnet, densenet, mobilenet) a block's input (the residual stream between
blocks, a dense block's input) has no recipe by default, like the transformers' block
inputs (docs/workloads.md): the checkpoints of Chen et al. 2016 and of
``torch.utils.checkpoint``'s segments; ``rebuild_block_inputs=True`` gives them their
recipe too (Checkmate's setting, Jain et al. MLSys 2020, where every op can be re-run).
Categories: "image", "conv_out" (a convolution output BatchNorm reads), "relu_out",
"pool_out", "block_input" (the input of the next stage or block), "block_output" (the
last one, read by the head), "concat", "feature" (a DenseNet layer's new features),
"fuse" (FCN's fused scores), "score", "pooled", "logits"; "temp" and "grad" are not
saved.

Blocks: ``Op.layer`` is the stage (fcn, unet levels, resnet and mobilenet stages, dense
blocks, cells); stems, heads and losses have layer -1.

The package: :mod:`~slackopt.workloads.shapes.net` (the forward graph and its emission,
the operator model above), :mod:`~slackopt.workloads.shapes.params` (parameter checks,
names), and the families by shape: :mod:`~slackopt.workloads.shapes.skips` (fcn, unet),
:mod:`~slackopt.workloads.shapes.residual` (resnet, mobilenet),
:mod:`~slackopt.workloads.shapes.dense` (densenet), :mod:`~slackopt.workloads.shapes.cells`
(branches).
"""

from __future__ import annotations

from collections.abc import Callable

from slackopt.instance import Instance
from slackopt.workloads.shapes.cells import BRANCHES_DEFAULTS, branches
from slackopt.workloads.shapes.dense import DENSENET_DEFAULTS, densenet
from slackopt.workloads.shapes.net import MAX_RECIPE_OPS
from slackopt.workloads.shapes.residual import (
    MOBILENET_DEFAULTS,
    MOBILENET_V2,
    RESNET_BLOCKS,
    RESNET_DEFAULTS,
    mobilenet,
    resnet,
)
from slackopt.workloads.shapes.residual import _stage_repeats as _stage_repeats
from slackopt.workloads.shapes.skips import FCN_DEFAULTS, UNET_DEFAULTS, VGG_STAGES, fcn, unet

FAMILIES: dict[str, Callable[..., Instance]] = {
    "fcn": fcn, "unet": unet, "resnet": resnet, "densenet": densenet,
    "mobilenet": mobilenet, "branches": branches}
"""The families by name; the workload registry names them ``shapes-<family>``."""


__all__ = ["FAMILIES", "MAX_RECIPE_OPS", "fcn", "unet", "resnet", "densenet", "mobilenet",
           "branches", "FCN_DEFAULTS", "UNET_DEFAULTS", "RESNET_DEFAULTS",
           "DENSENET_DEFAULTS", "MOBILENET_DEFAULTS", "BRANCHES_DEFAULTS", "VGG_STAGES",
           "RESNET_BLOCKS", "MOBILENET_V2"]
