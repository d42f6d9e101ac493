/* Op registration of retf's moments and normalizations of a matrix, and their gradients: tf.nn.moments over a
   matrix's rows and tf.nn.batch_normalization with one mean, variance, offset and scale per column (a dense layer's
   batch normalization), and tf.nn.moments over each row and tf.nn.batch_normalization with one mean and variance per
   row and one offset and scale per column (a layer normalization over the last axis, the matrix its other axes
   flattened). */

#include "shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

namespace {

// x [B, N] and every other input a vector [N]: the columns' count, or an error.
Status ColumnVectors(InferenceContext* c, int first_vector, int num_vectors, DimensionHandle* columns) {
  ShapeHandle x;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
  *columns = c->Dim(x, 1);
  for (int i = first_vector; i < first_vector + num_vectors; ++i) {
    ShapeHandle v;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &v));
    TF_RETURN_IF_ERROR(c->Merge(*columns, c->Dim(v, 0), columns));
  }
  return Status();
}

// x [R, N], inputs [first_row, first_row + num_rows) vectors [R] and [first_column, first_column + num_columns)
// vectors [N]: the rows' and the columns' counts, or an error.
Status RowAndColumnVectors(InferenceContext* c, int first_row, int num_rows, int first_column, int num_columns,
                           DimensionHandle* rows, DimensionHandle* columns) {
  ShapeHandle x;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
  *rows = c->Dim(x, 0);
  *columns = c->Dim(x, 1);
  for (int i = 0; i < num_rows + num_columns; ++i) {
    const bool row = i < num_rows;
    ShapeHandle v;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(row ? first_row + i : first_column + i - num_rows), 1, &v));
    TF_RETURN_IF_ERROR(c->Merge(row ? *rows : *columns, c->Dim(v, 0), row ? rows : columns));
  }
  return Status();
}

}  // namespace

// The mean and the (biased) variance of each column of x [B, N], as tf.nn.moments(x, axes=[0]) computes them: the
// variance is the mean of the squared differences from the mean. Sums kept in double for float.
REGISTER_OP("Retf>Moments")
    .Input("x: T")
    .Output("mean: T")
    .Output("variance: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle columns;
      TF_RETURN_IF_ERROR(ColumnVectors(c, 1, 0, &columns));
      c->set_output(0, c->Vector(columns));
      c->set_output(1, c->Vector(columns));
      return Status();
    });

// The gradient of Retf>Moments: mean_grad / B + variance_grad * 2 (x - mean) / B.
REGISTER_OP("Retf>MomentsGrad")
    .Input("x: T")
    .Input("mean: T")
    .Input("mean_grad: T")
    .Input("variance_grad: T")
    .Output("x_grad: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle columns;
      TF_RETURN_IF_ERROR(ColumnVectors(c, 1, 3, &columns));
      c->set_output(0, c->input(0));
      return Status();
    });

// x * inv + (offset - mean * inv), inv = scale / sqrt(variance + epsilon), per column: tf.nn.batch_normalization
// of x [B, N] with vectors [N], in one pass.
REGISTER_OP("Retf>BatchNormalize")
    .Input("x: T")
    .Input("mean: T")
    .Input("variance: T")
    .Input("offset: T")
    .Input("scale: T")
    .Output("y: T")
    .Attr("epsilon: float")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle columns;
      TF_RETURN_IF_ERROR(ColumnVectors(c, 1, 4, &columns));
      c->set_output(0, c->input(0));
      return Status();
    });

// The gradients of Retf>BatchNormalize for every input, from y's gradient, in one pass over x and it.
REGISTER_OP("Retf>BatchNormalizeGrad")
    .Input("y_grad: T")
    .Input("x: T")
    .Input("mean: T")
    .Input("variance: T")
    .Input("scale: T")
    .Output("x_grad: T")
    .Output("mean_grad: T")
    .Output("variance_grad: T")
    .Output("offset_grad: T")
    .Output("scale_grad: T")
    .Attr("epsilon: float")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &x));
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), x, &x));
      DimensionHandle columns = c->Dim(x, 1);
      for (int i = 2; i < 5; ++i) {
        ShapeHandle v;
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &v));
        TF_RETURN_IF_ERROR(c->Merge(columns, c->Dim(v, 0), &columns));
      }
      c->set_output(0, x);
      for (int i = 1; i < 5; ++i) c->set_output(i, c->Vector(columns));
      return Status();
    });

// The mean and the (biased) variance of each row of x [R, N], as tf.nn.moments(x, axes=[-1]) computes them. Sums
// kept in double for float.
REGISTER_OP("Retf>LayerMoments")
    .Input("x: T")
    .Output("mean: T")
    .Output("variance: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle rows, columns;
      TF_RETURN_IF_ERROR(RowAndColumnVectors(c, 1, 0, 1, 0, &rows, &columns));
      c->set_output(0, c->Vector(rows));
      c->set_output(1, c->Vector(rows));
      return Status();
    });

// The gradient of Retf>LayerMoments: mean_grad / N + variance_grad * 2 (x - mean) / N, per row.
REGISTER_OP("Retf>LayerMomentsGrad")
    .Input("x: T")
    .Input("mean: T")
    .Input("mean_grad: T")
    .Input("variance_grad: T")
    .Output("x_grad: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle rows, columns;
      TF_RETURN_IF_ERROR(RowAndColumnVectors(c, 1, 3, 1, 0, &rows, &columns));
      c->set_output(0, c->Matrix(rows, columns));
      return Status();
    });

// x * inv + (offset - mean * inv), inv = scale / sqrt(variance + epsilon), mean and variance per row [R], offset and
// scale per column [N]: tf.nn.batch_normalization of a layer's rows, in one pass.
REGISTER_OP("Retf>LayerNormalize")
    .Input("x: T")
    .Input("mean: T")
    .Input("variance: T")
    .Input("offset: T")
    .Input("scale: T")
    .Output("y: T")
    .Attr("epsilon: float")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle rows, columns;
      TF_RETURN_IF_ERROR(RowAndColumnVectors(c, 1, 2, 3, 2, &rows, &columns));
      c->set_output(0, c->Matrix(rows, columns));
      return Status();
    });

// The gradients of Retf>LayerNormalize for every input, from y's gradient, in one pass over x and it.
REGISTER_OP("Retf>LayerNormalizeGrad")
    .Input("y_grad: T")
    .Input("x: T")
    .Input("mean: T")
    .Input("variance: T")
    .Input("scale: T")
    .Output("x_grad: T")
    .Output("mean_grad: T")
    .Output("variance_grad: T")
    .Output("offset_grad: T")
    .Output("scale_grad: T")
    .Attr("epsilon: float")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &x));
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), x, &x));
      DimensionHandle rows = c->Dim(x, 0), columns = c->Dim(x, 1);
      for (int i = 2; i < 5; ++i) {
        ShapeHandle v;
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &v));
        TF_RETURN_IF_ERROR(c->Merge(i < 4 ? rows : columns, c->Dim(v, 0), i < 4 ? &rows : &columns));
      }
      c->set_output(0, c->Matrix(rows, columns));
      for (int i = 1; i < 3; ++i) c->set_output(i, c->Vector(rows));
      for (int i = 3; i < 5; ++i) c->set_output(i, c->Vector(columns));
      return Status();
    });

}  // namespace tensorflow
