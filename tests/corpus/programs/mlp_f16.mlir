module @jit_mlp_f16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x64xf16>, %arg1: tensor<64x128xf16>, %arg2: tensor<128xf16>, %arg3: tensor<128x64xf16>, %arg4: tensor<64xf16>) -> (tensor<64x64xf16> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x64xf16>, tensor<64x128xf16>) -> tensor<64x128xf16>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<128xf16>) -> tensor<1x128xf16>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x128xf16>) -> tensor<64x128xf16>
    %3 = stablehlo.add %0, %2 : tensor<64x128xf16>
    %4 = stablehlo.multiply %3, %3 : tensor<64x128xf16>
    %5 = stablehlo.multiply %4, %3 : tensor<64x128xf16>
    %cst = stablehlo.constant dense<4.470830e-02> : tensor<f16>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<64x128xf16>
    %7 = stablehlo.multiply %6, %5 : tensor<64x128xf16>
    %8 = stablehlo.add %3, %7 : tensor<64x128xf16>
    %cst_0 = stablehlo.constant dense<7.978520e-01> : tensor<f16>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f16>) -> tensor<64x128xf16>
    %10 = stablehlo.multiply %9, %8 : tensor<64x128xf16>
    %11 = stablehlo.tanh %10 : tensor<64x128xf16>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %12 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f16>) -> tensor<64x128xf16>
    %13 = stablehlo.add %12, %11 : tensor<64x128xf16>
    %cst_2 = stablehlo.constant dense<5.000000e-01> : tensor<f16>
    %14 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f16>) -> tensor<64x128xf16>
    %15 = stablehlo.multiply %14, %13 : tensor<64x128xf16>
    %16 = stablehlo.multiply %3, %15 : tensor<64x128xf16>
    %17 = stablehlo.dot_general %16, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x128xf16>, tensor<128x64xf16>) -> tensor<64x64xf16>
    %18 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<64xf16>) -> tensor<1x64xf16>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0, 1] : (tensor<1x64xf16>) -> tensor<64x64xf16>
    %20 = stablehlo.add %17, %19 : tensor<64x64xf16>
    return %20 : tensor<64x64xf16>
  }
}
