/* Op registrations of the EmbeddingVariable (DeepRec's semantics): a variable keyed by any int64, its rows
   created on first admission, updated by fused sparse optimizers, evicted and exported at save, imported from
   checkpoints of any number of partitions. */

#include "shape_fns.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

#define RETF_EV_OPTIONS                          \
  Attr("filter_freq: int = 0")                   \
      .Attr("steps_to_live: int = 0")            \
      .Attr("l2_threshold: float = 0")           \
      .Attr("no_permission_value: float = 0")

// A handle on an EmbeddingVariable, or on one of its optimizer slots, of rows of `dim` floats.
REGISTER_OP("Retf>EVHandle")
    .Output("resource: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("dim: int")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

// Sets the variable up: the initializer's rows ([rows, dim]; a new key starts from row key mod rows) and
// DeepRec's options (CounterFilter's filter_freq, GlobalStepEvict's steps_to_live, L2WeightEvict's
// threshold, the value a key not admitted reads). Drops every row it held.
REGISTER_OP("Retf>EVInitialize")
    .Input("resource: resource")
    .Input("default_values: float")
    .RETF_EV_OPTIONS
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

// Makes `slot` a column of `primary`'s rows, each key's starting at `initial` (dim values, or 1).
REGISTER_OP("Retf>EVSlotInitialize")
    .Input("slot: resource")
    .Input("primary: resource")
    .Input("initial: float")
    .Attr("dim: int")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVIsInitialized")
    .Input("resource: resource")
    .Output("is_initialized: bool")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

// The rows of keys (values: keys' shape + [width]). With count (training), each key's sighting counts; a key
// is admitted (its row created from the default values) at its filter_freq-th, and reads the no-permission
// value before. Without count nothing is created.
REGISTER_OP("Retf>EVGather")
    .Input("resource: resource")
    .Input("keys: int64")
    .Output("values: float")
    .Attr("count: bool = true")
    .Attr("width: int")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      int64 width;
      TF_RETURN_IF_ERROR(c->GetAttr("width", &width));
      ShapeHandle out;
      TF_RETURN_IF_ERROR(c->Concatenate(c->input(1), c->Vector(width), &out));
      c->set_output(0, out);
      return Status();
    });

// The fused sparse updates: grad [N, dim] for keys [N] (duplicates summed in position order), each key
// stamped with the global step `step`; keys without a row (not admitted) are not updated.
REGISTER_OP("Retf>EVApplyGradientDescent")
    .Input("var: resource")
    .Input("lr: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVApplyAdagrad")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVApplyAdagradDecay")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("decay_count: resource")
    .Input("lr: float")
    .Input("decay_step: int64")
    .Input("decay_rate: float")
    .Input("baseline: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: float")
    .Input("beta2_power: float")
    .Input("lr: float")
    .Input("beta1: float")
    .Input("beta2: float")
    .Input("epsilon: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVApplyAdamAsync")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: resource")
    .Input("beta2_power: resource")
    .Input("lr: float")
    .Input("beta1: float")
    .Input("beta2: float")
    .Input("epsilon: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("Retf>EVApplyFtrl")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("linear: resource")
    .Input("lr: float")
    .Input("l1: float")
    .Input("l2: float")
    .Input("l2_shrinkage: float")
    .Input("lr_power: float")
    .Input("grad: float")
    .Input("keys: int64")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

// GlobalStepEvict and L2WeightEvict at global step `step`: the number of keys dropped.
REGISTER_OP("Retf>EVEvict")
    .Input("resource: resource")
    .Input("step: int64")
    .Output("evicted: int64")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

// The variable's (or slot's) rows in DeepRec's checkpoint layout.
REGISTER_OP("Retf>EVExport")
    .Input("resource: resource")
    .Output("keys: int64")
    .Output("values: float")
    .Output("freqs: int64")
    .Output("versions: int64")
    .Output("keys_filtered: int64")
    .Output("freqs_filtered: int64")
    .Output("versions_filtered: int64")
    .Output("partition_offset: int32")
    .Output("partition_filter_offset: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i : {0, 2, 3, 4, 5, 6}) c->set_output(i, c->Vector(InferenceContext::kUnknownDim));
      c->set_output(1, c->Matrix(InferenceContext::kUnknownDim, InferenceContext::kUnknownDim));
      c->set_output(7, c->Vector(1001));
      c->set_output(8, c->Vector(1001));
      return Status();
    });

// Restores the variable (is_slot false: set up from init, its default values) or a slot (init: its initial
// row) from the checkpoint at prefix, saved unpartitioned (head + tail) or in any number of parts
// (head/part_<j> + tail), keeping the keys of partition `partition` of `partitions`.
REGISTER_OP("Retf>EVImport")
    .Input("resource: resource")
    .Input("primary: resource")
    .Input("prefix: string")
    .Input("init: float")
    .Attr("head: string")
    .Attr("tail: string = ''")
    .Attr("partition: int = 0")
    .Attr("partitions: int = 1")
    .Attr("is_slot: bool = false")
    .Attr("dim: int")
    .RETF_EV_OPTIONS
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

#undef RETF_EV_OPTIONS

}  // namespace tensorflow
