module @jit_log1mexp_f32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>) -> (tensor<16x128xf32> {jax.result_info = "result"}) {
    %0 = call @log1mexp(%arg0) : (tensor<16x128xf32>) -> tensor<16x128xf32>
    return %0 : tensor<16x128xf32>
  }
  func.func private @log1mexp(%arg0: tensor<16x128xf32>) -> tensor<16x128xf32> {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.log %cst : tensor<f32>
    %1 = stablehlo.convert %0 : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %3 = stablehlo.compare LT, %arg0, %2, FLOAT : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xi1>
    %4 = stablehlo.negate %arg0 : tensor<16x128xf32>
    %5 = stablehlo.exponential_minus_one %4 : tensor<16x128xf32>
    %6 = stablehlo.negate %5 : tensor<16x128xf32>
    %7 = stablehlo.log %6 : tensor<16x128xf32>
    %8 = stablehlo.negate %arg0 : tensor<16x128xf32>
    %9 = stablehlo.exponential %8 : tensor<16x128xf32>
    %10 = stablehlo.negate %9 : tensor<16x128xf32>
    %11 = stablehlo.log_plus_one %10 : tensor<16x128xf32>
    %12 = call @_where(%3, %7, %11) : (tensor<16x128xi1>, tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
    return %12 : tensor<16x128xf32>
  }
  func.func private @_where(%arg0: tensor<16x128xi1>, %arg1: tensor<16x128xf32>, %arg2: tensor<16x128xf32>) -> tensor<16x128xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<16x128xi1>, tensor<16x128xf32>
    return %0 : tensor<16x128xf32>
  }
}
