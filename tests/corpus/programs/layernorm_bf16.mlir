module @jit_layernorm_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x32x64xbf16>, %arg1: tensor<64xbf16>, %arg2: tensor<64xbf16>) -> (tensor<4x32x64xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.convert %arg0 : (tensor<4x32x64xbf16>) -> tensor<4x32x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
    %cst_0 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x32x1xf32>
    %4 = stablehlo.divide %2, %3 : tensor<4x32x1xf32>
    %5 = stablehlo.convert %4 : (tensor<4x32x1xf32>) -> tensor<4x32x1xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %6 = call @_var(%arg0, %c) : (tensor<4x32x64xbf16>, tensor<i32>) -> tensor<4x32x1xbf16>
    %7 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<4x32x1xbf16>) -> tensor<4x32x64xbf16>
    %8 = stablehlo.subtract %arg0, %7 : tensor<4x32x64xbf16>
    %cst_1 = stablehlo.constant dense<1.001360e-05> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<4x32x1xbf16>
    %10 = stablehlo.add %6, %9 : tensor<4x32x1xbf16>
    %11 = stablehlo.rsqrt %10 : tensor<4x32x1xbf16>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2] : (tensor<4x32x1xbf16>) -> tensor<4x32x64xbf16>
    %13 = stablehlo.multiply %8, %12 : tensor<4x32x64xbf16>
    %14 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<64xbf16>) -> tensor<1x1x64xbf16>
    %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2] : (tensor<1x1x64xbf16>) -> tensor<4x32x64xbf16>
    %16 = stablehlo.multiply %13, %15 : tensor<4x32x64xbf16>
    %17 = stablehlo.broadcast_in_dim %arg2, dims = [2] : (tensor<64xbf16>) -> tensor<1x1x64xbf16>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2] : (tensor<1x1x64xbf16>) -> tensor<4x32x64xbf16>
    %19 = stablehlo.add %16, %18 : tensor<4x32x64xbf16>
    return %19 : tensor<4x32x64xbf16>
  }
  func.func private @_var(%arg0: tensor<4x32x64xbf16>, %arg1: tensor<i32>) -> tensor<4x32x1xbf16> {
    %0 = stablehlo.convert %arg0 : (tensor<4x32x64xbf16>) -> tensor<4x32x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
    %cst_0 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x32x1xf32>
    %4 = stablehlo.divide %2, %3 : tensor<4x32x1xf32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1, 2] : (tensor<4x32x1xf32>) -> tensor<4x32x64xf32>
    %6 = stablehlo.subtract %0, %5 : tensor<4x32x64xf32>
    %7 = chlo.square %6 : tensor<4x32x64xf32> -> tensor<4x32x64xf32>
    %8 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %9 = stablehlo.subtract %cst_1, %8 : tensor<f32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %10 = stablehlo.reduce(%7 init: %cst_2) applies stablehlo.add across dimensions = [2] : (tensor<4x32x64xf32>, tensor<f32>) -> tensor<4x32xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1] : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
    %12 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<f32>) -> tensor<4x32x1xf32>
    %13 = stablehlo.divide %11, %12 : tensor<4x32x1xf32>
    %14 = stablehlo.convert %13 : (tensor<4x32x1xf32>) -> tensor<4x32x1xbf16>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.compare GT, %9, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %cst_4 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %16 = call @_where(%15, %14, %cst_4) : (tensor<i1>, tensor<4x32x1xbf16>, tensor<f32>) -> tensor<4x32x1xbf16>
    return %16 : tensor<4x32x1xbf16>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<4x32x1xbf16>, %arg2: tensor<f32>) -> tensor<4x32x1xbf16> {
    %0 = stablehlo.convert %arg2 : (tensor<f32>) -> tensor<bf16>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<bf16>) -> tensor<4x32x1xbf16>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<4x32x1xbf16>
    return %2 : tensor<4x32x1xbf16>
  }
}
