/* Op registrations of the gradients of DIN's activation unit: a concat of x, y, their differences and
   products, and the dense layer over it. */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// The input gradient of a dense layer z = concat(pieces, -1) w, for P pieces of like's shape [..., D]
// (DIN's activation unit: [x, y, x - y, x * y]) and grad = dL/dz as a matrix: input_grad = grad w^T
// ([rows, P * D], the concat's gradient as the layer sees it) and piece_grads[i] = grad w_i^T (like's
// shape), w_i the i-th block of D rows of w. Each output is computed only where a consumer of it runs:
// retf routes the layer's whole gradient through cheaper products and reads none of them, unless a
// program asks for the gradient of the concat or of a piece itself.
REGISTER_OP("Retf>PairDenseInputGrad")
    .Input("grad: T")
    .Input("w: T")
    .Input("like: T")
    .Output("input_grad: T")
    .Output("piece_grads: P * T")
    .Attr("P: int >= 1")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      int p;
      TF_RETURN_IF_ERROR(c->GetAttr("P", &p));
      ShapeHandle grad, w, like;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &grad));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &w));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 1, &like));
      DimensionHandle units;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(grad, 1), c->Dim(w, 1), &units));
      DimensionHandle width = c->Dim(w, 0);
      if (c->RankKnown(like)) {
        TF_RETURN_IF_ERROR(c->Multiply(c->Dim(like, c->Rank(like) - 1), p, &width));
        TF_RETURN_IF_ERROR(c->Merge(width, c->Dim(w, 0), &width));
      }
      c->set_output(0, c->Matrix(c->Dim(grad, 0), width));
      for (int i = 0; i < p; ++i) c->set_output(1 + i, like);
      return Status();
    });

// The operands' gradients of a dense layer z = concat(pieces, -1) w over x, y and their differences and
// product, where x repeats each row of query [B, D] over a sequence (DIN's query against each step of the
// behaviour, y [..., D] with R = B x T rows, the rows of x's b-th query consecutive). With grad = dL/dz
// [R, units], w_x the sum of w's signed blocks that x's pieces take and w_y and w_p likewise, parts = grad
// [w_y; w_p]^T [R, 2 x D] (w_x's part left out of the per-step product): grad_y = parts_y + parts_p x;
// query_grad = sums w_x^T + the sum over the query's steps of parts_p y (sums [B, units] being grad summed
// over each query's steps), the query's whole gradient; grad_x = grad w_x^T + parts_p y, x's own gradient
// per step. Each output is computed only where a consumer of it runs: retf's Tile gradient takes
// query_grad where grad_x would only be summed over the sequence. Sums are in order: units from zero,
// then steps from the first.
REGISTER_OP("Retf>RepeatedPairGrad")
    .Input("parts: T")
    .Input("query: T")
    .Input("y: T")
    .Input("grad: T")
    .Input("w_x: T")
    .Input("sums: T")
    .Output("grad_y: T")
    .Output("query_grad: T")
    .Output("grad_x: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle parts, query, y, grad, w_x, sums;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &parts));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &query));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 1, &y));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &grad));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 2, &w_x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &sums));
      DimensionHandle d = c->Dim(query, 1), units, rows;
      TF_RETURN_IF_ERROR(c->Merge(d, c->Dim(w_x, 0), &d));
      if (c->RankKnown(y)) TF_RETURN_IF_ERROR(c->Merge(d, c->Dim(y, c->Rank(y) - 1), &d));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(grad, 1), c->Dim(w_x, 1), &units));
      TF_RETURN_IF_ERROR(c->Merge(units, c->Dim(sums, 1), &units));
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(parts, 0), c->Dim(grad, 0), &rows));
      c->set_output(0, y);
      c->set_output(1, c->Matrix(c->Dim(query, 0), d));
      c->set_output(2, y);
      return Status();
    });

// The gradient of concat([x, y, x - y, x * y, ...], axis=-1), for x and y of one shape [..., D]
// (DIN's activation unit builds its input so): each of the N pieces is one of "x", "y", "x-y",
// "y-x", "x*y", with x and y each once. grad_x and grad_y are the whole gradients of x and y
// through the concat and its differences and products, each the direct piece's slice first, then
// the others' parts in piece order (TensorFlow's AddN may add the same terms in another order).
// piece_grads are the concat gradient's slices, computed only where used.
REGISTER_OP("Retf>PairConcatGrad")
    .Input("grad: T")
    .Input("x: T")
    .Input("y: T")
    .Output("grad_x: T")
    .Output("grad_y: T")
    .Output("piece_grads: N * T")
    .Attr("pieces: list(string)")
    .Attr("N: int >= 3")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      int n;
      TF_RETURN_IF_ERROR(c->GetAttr("N", &n));
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(1), 1, &x));
      TF_RETURN_IF_ERROR(c->Merge(x, c->input(2), &x));
      ShapeHandle grad;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &grad));
      if (c->RankKnown(x) && c->RankKnown(grad)) {
        const int rank = c->Rank(x);
        TF_RETURN_IF_ERROR(c->WithRank(grad, rank, &grad));
        ShapeHandle outer_x, outer_grad;
        TF_RETURN_IF_ERROR(c->Subshape(x, 0, rank - 1, &outer_x));
        TF_RETURN_IF_ERROR(c->Subshape(grad, 0, rank - 1, &outer_grad));
        TF_RETURN_IF_ERROR(c->Merge(outer_x, outer_grad, &outer_x));
        DimensionHandle width;
        TF_RETURN_IF_ERROR(c->Multiply(c->Dim(x, rank - 1), n, &width));
        TF_RETURN_IF_ERROR(c->Merge(width, c->Dim(grad, rank - 1), &width));
        TF_RETURN_IF_ERROR(c->Concatenate(outer_x, c->Vector(c->Dim(x, rank - 1)), &x));
      }
      for (int i = 0; i < n + 2; ++i) c->set_output(i, x);
      return Status();
    });

}  // namespace tensorflow
