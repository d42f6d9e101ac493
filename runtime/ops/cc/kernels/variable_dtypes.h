/* The fused optimizers' first check: each resource variable input holds the dtype the kernel was chosen for. */

#ifndef RETF_OPS_CC_KERNELS_VARIABLE_DTYPES_H_
#define RETF_OPS_CC_KERNELS_VARIABLE_DTYPES_H_

#include <initializer_list>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/lib/core/errors.h"

namespace retf {

// A resource variable's dtype is known only when the kernel runs, and TensorFlow's variable
// helpers (MaybeLockVariableInputMutexesInOrder, GetInputTensorFromVariable) read the variable as
// the kernel's T without asking: a float64 table under a float32 kernel would abort the process.
// So the kernels ask first. A reference input's type is the graph's, checked when it is built; a
// handle that names no variable, or an uninitialized one, is left to the helpers' own errors.
template <typename T>
tensorflow::Status CheckVariableDtypes(tensorflow::OpKernelContext* ctx, std::initializer_list<int> inputs) {
  for (int i : inputs) {
    if (ctx->input_dtype(i) != tensorflow::DT_RESOURCE) continue;
    tensorflow::core::RefCountPtr<tensorflow::Var> var;
    if (!tensorflow::LookupResource(ctx, tensorflow::HandleFromInput(ctx, i), &var).ok()) continue;
    const tensorflow::Tensor* tensor = var->tensor();
    if (tensor->IsInitialized() && tensor->dtype() != tensorflow::DataTypeToEnum<T>::v()) {
      return tensorflow::errors::InvalidArgument(
          ctx->op_kernel().requested_input(i), " holds ", tensorflow::DataTypeString(tensor->dtype()),
          "; the op's other inputs are ", tensorflow::DataTypeString(tensorflow::DataTypeToEnum<T>::v()));
    }
  }
  return tensorflow::Status();
}

}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_VARIABLE_DTYPES_H_
