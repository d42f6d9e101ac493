/* Op registration of retf's transposed product, a dense layer's weight gradient. */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// a^T b for matrices a [K, M] and b [K, N]: the weight gradient of a dense layer, whose input is a
// and output gradient b. What MatMul computes with transpose_a = true, each chunk of K's rows summed
// on one thread and the chunks' sums added in order (the result does not depend on the threads).
REGISTER_OP("Retf>TransposedMatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle a, b;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
      DimensionHandle rows;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(a, 0), c->Dim(b, 0), &rows));
      c->set_output(0, c->Matrix(c->Dim(a, 1), c->Dim(b, 1)));
      return Status();
    });

}  // namespace tensorflow
