module @jit_bool_ops_bool attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x64xi1>, %arg1: tensor<32x64xi1>, %arg2: tensor<32x64xf32>, %arg3: tensor<32x64xf32>) -> (tensor<64xi1> {jax.result_info = "result['all']"}, tensor<32x64xi1> {jax.result_info = "result['and']"}, tensor<32xi1> {jax.result_info = "result['any']"}, tensor<32x64xi1> {jax.result_info = "result['not']"}, tensor<32x64xi1> {jax.result_info = "result['or']"}, tensor<32x64xf32> {jax.result_info = "result['where']"}, tensor<32x64xf32> {jax.result_info = "result['where_and_not']"}, tensor<32x64xi1> {jax.result_info = "result['xor']"}) {
    %0 = stablehlo.and %arg0, %arg1 : tensor<32x64xi1>
    %1 = stablehlo.or %arg0, %arg1 : tensor<32x64xi1>
    %2 = stablehlo.not %arg0 : tensor<32x64xi1>
    %3 = stablehlo.xor %arg0, %arg1 : tensor<32x64xi1>
    %4 = call @_where(%arg0, %arg2, %arg3) : (tensor<32x64xi1>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
    %5 = stablehlo.not %arg1 : tensor<32x64xi1>
    %6 = stablehlo.and %arg0, %5 : tensor<32x64xi1>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = call @_where_0(%6, %arg2, %cst) : (tensor<32x64xi1>, tensor<32x64xf32>, tensor<f32>) -> tensor<32x64xf32>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %8 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.or across dimensions = [1] : (tensor<32x64xi1>, tensor<i1>) -> tensor<32xi1>
    %c_0 = stablehlo.constant dense<true> : tensor<i1>
    %9 = stablehlo.reduce(%arg1 init: %c_0) applies stablehlo.and across dimensions = [0] : (tensor<32x64xi1>, tensor<i1>) -> tensor<64xi1>
    return %9, %0, %8, %2, %1, %4, %7, %3 : tensor<64xi1>, tensor<32x64xi1>, tensor<32xi1>, tensor<32x64xi1>, tensor<32x64xi1>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xi1>
  }
  func.func private @_where(%arg0: tensor<32x64xi1>, %arg1: tensor<32x64xf32>, %arg2: tensor<32x64xf32>) -> tensor<32x64xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<32x64xi1>, tensor<32x64xf32>
    return %0 : tensor<32x64xf32>
  }
  func.func private @_where_0(%arg0: tensor<32x64xi1>, %arg1: tensor<32x64xf32>, %arg2: tensor<f32>) -> tensor<32x64xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<32x64xi1>, tensor<32x64xf32>
    return %2 : tensor<32x64xf32>
  }
}
