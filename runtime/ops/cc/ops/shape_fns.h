/* What the op registrations of every family share: how a shape function says OK, and the shape of a resource
   input's variable. */

#ifndef RETF_OPS_CC_OPS_SHAPE_FNS_H_
#define RETF_OPS_CC_OPS_SHAPE_FNS_H_

#include "tensorflow/core/framework/shape_inference.h"

namespace retf {

// A default Status is OK in every TF 2.x: Status::OK() is gone from TF 2.13, where Status is absl::Status.

// The shape of the variable behind a resource input; unknown when the handle carries none.
inline tensorflow::shape_inference::ShapeHandle ResourceShape(tensorflow::shape_inference::InferenceContext* c,
                                                              int input) {
  const auto* handle_data = c->input_handle_shapes_and_types(input);
  if (handle_data != nullptr && !handle_data->empty() && (*handle_data)[0].dtype != tensorflow::DT_INVALID) {
    return (*handle_data)[0].shape;
  }
  return c->UnknownShape();
}

}  // namespace retf

#endif  // RETF_OPS_CC_OPS_SHAPE_FNS_H_
