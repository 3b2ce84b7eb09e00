module @jit_lax_shape_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<6x8x16xbf16>, %arg1: tensor<6x3x16xbf16>, %arg2: tensor<16xbf16>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> (tensor<6x8x16xbf16> {jax.result_info = "result['broadcast']"}, tensor<6x11x16xbf16> {jax.result_info = "result['concatenate']"}, tensor<3x4x16xbf16> {jax.result_info = "result['dynamic_slice']"}, tensor<6x8x16xbf16> {jax.result_info = "result['dynamic_update_slice']"}, tensor<6x8xbf16> {jax.result_info = "result['iota']"}, tensor<9x16x14xbf16> {jax.result_info = "result['pad']"}, tensor<16x48xbf16> {jax.result_info = "result['reshape']"}, tensor<6x8x16xbf16> {jax.result_info = "result['rev']"}, tensor<2x6x6xbf16> {jax.result_info = "result['slice']"}, tensor<16x6x8xbf16> {jax.result_info = "result['transpose']"}) {
    %0 = stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<6x8x16xbf16>) -> tensor<16x6x8xbf16>
    %1 = stablehlo.reshape %arg0 : (tensor<6x8x16xbf16>) -> tensor<16x48xbf16>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [2] : (tensor<16xbf16>) -> tensor<6x8x16xbf16>
    %3 = stablehlo.concatenate %arg0, %arg1, dim = 1 : (tensor<6x8x16xbf16>, tensor<6x3x16xbf16>) -> tensor<6x11x16xbf16>
    %4 = stablehlo.slice %arg0 [1:5:2, 2:8, 0:16:3] : (tensor<6x8x16xbf16>) -> tensor<2x6x6xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.compare LT, %arg3, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<6> : tensor<i32>
    %6 = stablehlo.add %arg3, %c_0 : tensor<i32>
    %7 = stablehlo.select %5, %6, %arg3 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.compare LT, %arg4, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<8> : tensor<i32>
    %9 = stablehlo.add %arg4, %c_2 : tensor<i32>
    %10 = stablehlo.select %8, %9, %arg4 : tensor<i1>, tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %c_4 = stablehlo.constant dense<16> : tensor<i32>
    %11 = stablehlo.add %c_3, %c_4 : tensor<i32>
    %c_5 = stablehlo.constant dense<false> : tensor<i1>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %12 = stablehlo.select %c_5, %11, %c_6 : tensor<i1>, tensor<i32>
    %13 = stablehlo.dynamic_slice %arg0, %7, %10, %12, sizes = [3, 4, 16] : (tensor<6x8x16xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x4x16xbf16>
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %14 = stablehlo.compare LT, %arg3, %c_7, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_8 = stablehlo.constant dense<6> : tensor<i32>
    %15 = stablehlo.add %arg3, %c_8 : tensor<i32>
    %16 = stablehlo.select %14, %15, %arg3 : tensor<i1>, tensor<i32>
    %c_9 = stablehlo.constant dense<0> : tensor<i32>
    %17 = stablehlo.compare LT, %arg4, %c_9, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_10 = stablehlo.constant dense<8> : tensor<i32>
    %18 = stablehlo.add %arg4, %c_10 : tensor<i32>
    %19 = stablehlo.select %17, %18, %arg4 : tensor<i1>, tensor<i32>
    %c_11 = stablehlo.constant dense<0> : tensor<i32>
    %c_12 = stablehlo.constant dense<16> : tensor<i32>
    %20 = stablehlo.add %c_11, %c_12 : tensor<i32>
    %c_13 = stablehlo.constant dense<false> : tensor<i1>
    %c_14 = stablehlo.constant dense<0> : tensor<i32>
    %21 = stablehlo.select %c_13, %20, %c_14 : tensor<i1>, tensor<i32>
    %22 = stablehlo.dynamic_update_slice %arg0, %arg1, %16, %19, %21 : (tensor<6x8x16xbf16>, tensor<6x3x16xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<6x8x16xbf16>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %23 = stablehlo.pad %arg0, %cst, low = [1, 0, -2], high = [2, 1, 0], interior = [0, 1, 0] : (tensor<6x8x16xbf16>, tensor<bf16>) -> tensor<9x16x14xbf16>
    %24 = stablehlo.reverse %arg0, dims = [0, 2] : tensor<6x8x16xbf16>
    %25 = stablehlo.iota dim = 1 : tensor<6x8xbf16>
    return %2, %3, %13, %22, %25, %23, %1, %24, %4, %0 : tensor<6x8x16xbf16>, tensor<6x11x16xbf16>, tensor<3x4x16xbf16>, tensor<6x8x16xbf16>, tensor<6x8xbf16>, tensor<9x16x14xbf16>, tensor<16x48xbf16>, tensor<6x8x16xbf16>, tensor<2x6x6xbf16>, tensor<16x6x8xbf16>
  }
}
