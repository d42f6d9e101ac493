/* Op registration of retf's GRU recurrence: a whole tf.nn.dynamic_rnn over a GRUCell in one op, and its gradient. */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

// Steps T, batch B and units H from x_ru [T, B, 2H], x_c [T, B, H], h0 [B, H], lengths [B],
// w_ru_h [H, 2H] and w_c_h [H, H].
Status GruDims(InferenceContext* c, DimensionHandle* batch, DimensionHandle* steps, DimensionHandle* units) {
  ShapeHandle x_ru, x_c, h0, lengths, w_ru_h, w_c_h;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &x_ru));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &x_c));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &h0));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &lengths));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 2, &w_ru_h));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &w_c_h));
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(x_ru, 1), c->Dim(x_c, 1), batch));
  TF_RETURN_IF_ERROR(c->Merge(*batch, c->Dim(h0, 0), batch));
  TF_RETURN_IF_ERROR(c->Merge(*batch, c->Dim(lengths, 0), batch));
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(x_ru, 0), c->Dim(x_c, 0), steps));
  *units = c->Dim(x_c, 2);
  TF_RETURN_IF_ERROR(c->Merge(*units, c->Dim(h0, 1), units));
  TF_RETURN_IF_ERROR(c->Merge(*units, c->Dim(w_c_h, 0), units));
  TF_RETURN_IF_ERROR(c->Merge(*units, c->Dim(w_c_h, 1), units));
  TF_RETURN_IF_ERROR(c->Merge(*units, c->Dim(w_ru_h, 0), units));
  return Status();
}

}  // namespace

// The recurrence of a GRU (tf.nn.rnn_cell.GRUCell's arithmetic) over a batch of sequences, time-major as
// tf.nn.dynamic_rnn's loop takes them, the input's products already taken: x_ru = x W_ru[:I] + b_ru and x_c = x W_c[:I] + b_c for every step. Per row b and
// step t < lengths[b] (lengths clamped to [0, T]):
//   r, u = sigmoid(x_ru[t, b] + h w_ru_h);  c = tanh(x_c[t, b] + (r * h) w_c_h);  h = u * h + (1 - u) * c
// as tf.nn.dynamic_rnn runs it: outputs[t, b] = h, zero past the row's length, and final the last step's
// h (h0 for a row of length 0). gates (r, u, c) and h_prev (each step's incoming h) are for the gradient.
REGISTER_OP("Retf>GRURecurrence")
    .Input("x_ru: float")
    .Input("x_c: float")
    .Input("h0: float")
    .Input("lengths: int32")
    .Input("w_ru_h: float")
    .Input("w_c_h: float")
    .Output("outputs: float")
    .Output("final: float")
    .Output("gates: float")
    .Output("h_prev: float")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle batch, steps, units, thrice;
      TF_RETURN_IF_ERROR(GruDims(c, &batch, &steps, &units));
      TF_RETURN_IF_ERROR(c->Multiply(units, 3, &thrice));
      c->set_output(0, c->MakeShape({steps, batch, units}));
      c->set_output(1, c->Matrix(batch, units));
      c->set_output(2, c->MakeShape({steps, batch, thrice}));
      c->set_output(3, c->MakeShape({steps, batch, units}));
      return Status();
    });

// The gradients of Retf>GRURecurrence for x_ru, x_c, h0, w_ru_h and w_c_h, from the gradients of its
// outputs and final state and what its forward pass kept (gates, h_prev). The weights' gradients are
// sums over every row and step, taken in an order that does not depend on the threads.
REGISTER_OP("Retf>GRURecurrenceGrad")
    .Input("d_outputs: float")
    .Input("d_final: float")
    .Input("gates: float")
    .Input("h_prev: float")
    .Input("lengths: int32")
    .Input("w_ru_h: float")
    .Input("w_c_h: float")
    .Output("d_x_ru: float")
    .Output("d_x_c: float")
    .Output("d_h0: float")
    .Output("d_w_ru_h: float")
    .Output("d_w_c_h: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle h_prev, w_ru_h, w_c_h;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 3, &h_prev));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &w_ru_h));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(6), 2, &w_c_h));
      DimensionHandle units = c->Dim(h_prev, 2), twice;
      TF_RETURN_IF_ERROR(c->Multiply(units, 2, &twice));
      c->set_output(0, c->MakeShape({c->Dim(h_prev, 0), c->Dim(h_prev, 1), twice}));
      c->set_output(1, h_prev);
      c->set_output(2, c->Matrix(c->Dim(h_prev, 1), units));
      c->set_output(3, w_ru_h);
      c->set_output(4, w_c_h);
      return Status();
    });

}  // namespace tensorflow
