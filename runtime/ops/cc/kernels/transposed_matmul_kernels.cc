/* OpKernel of Retf>TransposedMatMul. */

#include "transposed_matmul_kernels.h"

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tensorflow {
namespace {

template <typename T>
class TransposedMatMulOp : public OpKernel {
 public:
  explicit TransposedMatMulOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(a.shape()) && TensorShapeUtils::IsMatrix(b.shape()),
                errors::InvalidArgument("a and b must be matrices, got shapes ", a.shape().DebugString(), " and ",
                                        b.shape().DebugString()));
    OP_REQUIRES(ctx, a.dim_size(0) == b.dim_size(0),
                errors::InvalidArgument("a and b must have as many rows (the summed dimension), got shapes ",
                                        a.shape().DebugString(), " and ", b.shape().DebugString()));
    const int64 k_size = a.dim_size(0), m_size = a.dim_size(1), n_size = b.dim_size(1);
    Tensor* product = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m_size, n_size}), &product));
    retf::functor::TransposedMatMul<T>()(ctx->device()->tensorflow_cpu_worker_threads()->workers,
                                         a.flat<T>().data(), b.flat<T>().data(), k_size, m_size, n_size,
                                         product->flat<T>().data(), retf::functor::BestTransposedMatMulPath());
  }
};

#define RETF_REGISTER_KERNELS(T) \
  REGISTER_KERNEL_BUILDER(Name("Retf>TransposedMatMul").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          TransposedMatMulOp<T>);

RETF_REGISTER_KERNELS(float);
RETF_REGISTER_KERNELS(double);
#undef RETF_REGISTER_KERNELS

}  // namespace
}  // namespace tensorflow
