// Argument readers that more than one capi*.cpp file needs (capi.cpp
// defines them): each validates what it reads and throws Error, so call
// them inside guarded().
#pragma once

#include <cstdint>

#include "approxmul.h"
#include "kernels/kernels.hpp"

namespace approxmul {

// approxmul_conv2d's problem from its arguments up to the zero points
// (shapes and strides: 4 entries, stride/padding/dilation: 2); out is left
// to the caller. Values are checked later, by kernels::check.
kernels::Conv2dProblem conv2d_arguments(const approxmul_multiplier *m,
                                        const approxmul_dtype &x_dtype, const void *x,
                                        const int64_t *x_shape, const int64_t *x_strides,
                                        const approxmul_dtype &w_dtype, const void *w,
                                        const int64_t *w_shape, const int64_t *w_strides,
                                        const int64_t *stride, const int64_t *padding,
                                        const int64_t *dilation, int64_t groups,
                                        int64_t x_zero_point, int64_t w_zero_point);

}  // namespace approxmul
