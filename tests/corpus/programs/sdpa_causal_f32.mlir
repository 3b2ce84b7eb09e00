module @jit_sdpa_causal_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x32x4x16xf32>, %arg1: tensor<2x32x4x16xf32>, %arg2: tensor<2x32x4x16xf32>) -> (tensor<2x32x4x16xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<2x32x4x16xf32>) -> tensor<2x32x4x1x16xf32>
    %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT] : (tensor<2x32x4x1x16xf32>, tensor<2x32x4x16xf32>) -> tensor<2x4x32x1x32xf32>
    %cst = stablehlo.constant dense<2.500000e-01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4x32x1x32xf32>
    %3 = stablehlo.multiply %1, %2 : tensor<2x4x32x1x32xf32>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %4 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<2x4x32x32xi1>
    %c_0 = stablehlo.constant dense<true> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<32x32xi1>
    %6 = call @tril(%5) : (tensor<32x32xi1>) -> tensor<32x32xi1>
    %7 = stablehlo.broadcast_in_dim %6, dims = [2, 3] : (tensor<32x32xi1>) -> tensor<1x1x32x32xi1>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 2, 3] : (tensor<1x1x32x32xi1>) -> tensor<2x4x32x32xi1>
    %9 = stablehlo.and %4, %8 : tensor<2x4x32x32xi1>
    %cst_1 = stablehlo.constant dense<-2.38197633E+38> : tensor<f32>
    %10 = call @_where(%9, %3, %cst_1) : (tensor<2x4x32x32xi1>, tensor<2x4x32x1x32xf32>, tensor<f32>) -> tensor<1x2x4x32x32xf32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %11 = stablehlo.reduce(%10 init: %cst_2) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x4x32x32xf32>, tensor<f32>) -> tensor<1x2x4x32xf32>
    %cst_3 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<1x2x4x32xf32>
    %13 = stablehlo.maximum %12, %11 : tensor<1x2x4x32xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1, 2, 3] : (tensor<1x2x4x32xf32>) -> tensor<1x2x4x32x1xf32>
    %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x32x1xf32>) -> tensor<1x2x4x32x32xf32>
    %16 = stablehlo.subtract %10, %15 : tensor<1x2x4x32x32xf32>
    %17 = stablehlo.exponential %16 : tensor<1x2x4x32x32xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.reduce(%17 init: %cst_4) applies stablehlo.add across dimensions = [4] : (tensor<1x2x4x32x32xf32>, tensor<f32>) -> tensor<1x2x4x32xf32>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0, 1, 2, 3] : (tensor<1x2x4x32xf32>) -> tensor<1x2x4x32x1xf32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [0, 1, 2, 3, 4] : (tensor<1x2x4x32x1xf32>) -> tensor<1x2x4x32x32xf32>
    %21 = stablehlo.divide %17, %20 : tensor<1x2x4x32x32xf32>
    %22 = stablehlo.dot_general %arg2, %21, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4], precision = [DEFAULT, DEFAULT] : (tensor<2x32x4x16xf32>, tensor<1x2x4x32x32xf32>) -> tensor<2x4x16x1x32xf32>
    %23 = stablehlo.transpose %22, dims = [3, 0, 4, 1, 2] : (tensor<2x4x16x1x32xf32>) -> tensor<1x2x32x4x16xf32>
    %24 = stablehlo.transpose %23, dims = [1, 2, 3, 0, 4] : (tensor<1x2x32x4x16xf32>) -> tensor<2x32x4x1x16xf32>
    %25 = stablehlo.reshape %24 : (tensor<2x32x4x1x16xf32>) -> tensor<2x32x4x16xf32>
    return %25 : tensor<2x32x4x16xf32>
  }
  func.func private @tril(%arg0: tensor<32x32xi1>) -> tensor<32x32xi1> {
    %0 = stablehlo.iota dim = 0 : tensor<32x32xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<32x32xi32>
    %2 = stablehlo.add %0, %1 : tensor<32x32xi32>
    %3 = stablehlo.iota dim = 1 : tensor<32x32xi32>
    %4 = stablehlo.compare GE, %2, %3, SIGNED : (tensor<32x32xi32>, tensor<32x32xi32>) -> tensor<32x32xi1>
    %c_0 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<32x32xi1>
    %6 = stablehlo.select %4, %arg0, %5 : tensor<32x32xi1>, tensor<32x32xi1>
    return %6 : tensor<32x32xi1>
  }
  func.func private @_where(%arg0: tensor<2x4x32x32xi1>, %arg1: tensor<2x4x32x1x32xf32>, %arg2: tensor<f32>) -> tensor<1x2x4x32x32xf32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<2x4x32x32xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2, 3, 4] : (tensor<2x4x32x32xi1>) -> tensor<1x2x4x32x32xi1>
    %2 = stablehlo.broadcast_in_dim %0, dims = [1, 2, 3, 4] : (tensor<2x4x32x32xf32>) -> tensor<1x2x4x32x32xf32>
    %3 = stablehlo.transpose %arg1, dims = [3, 0, 1, 2, 4] : (tensor<2x4x32x1x32xf32>) -> tensor<1x2x4x32x32xf32>
    %4 = stablehlo.select %1, %3, %2 : tensor<1x2x4x32x32xi1>, tensor<1x2x4x32x32xf32>
    return %4 : tensor<1x2x4x32x32xf32>
  }
}
