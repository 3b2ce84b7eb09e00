module @jit_lax_binary_f64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xf64>, %arg1: tensor<32x48xf64>, %arg2: tensor<32x48xf64>, %arg3: tensor<32x48xf64>) -> (tensor<32x48xf64> {jax.result_info = "result['add']"}, tensor<32x48xf64> {jax.result_info = "result['atan2']"}, tensor<32x48xf64> {jax.result_info = "result['div']"}, tensor<32x48xf64> {jax.result_info = "result['max']"}, tensor<32x48xf64> {jax.result_info = "result['min']"}, tensor<32x48xf64> {jax.result_info = "result['mul']"}, tensor<32x48xf64> {jax.result_info = "result['pow']"}, tensor<32x48xf64> {jax.result_info = "result['rem']"}, tensor<32x48xf64> {jax.result_info = "result['sub']"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<32x48xf64>
    %1 = stablehlo.subtract %arg0, %arg1 : tensor<32x48xf64>
    %2 = stablehlo.multiply %arg0, %arg1 : tensor<32x48xf64>
    %3 = stablehlo.divide %arg0, %arg2 : tensor<32x48xf64>
    %4 = stablehlo.remainder %arg0, %arg2 : tensor<32x48xf64>
    %5 = stablehlo.maximum %arg0, %arg1 : tensor<32x48xf64>
    %6 = stablehlo.minimum %arg0, %arg1 : tensor<32x48xf64>
    %7 = stablehlo.power %arg3, %arg1 : tensor<32x48xf64>
    %8 = stablehlo.atan2 %arg0, %arg1 : tensor<32x48xf64>
    return %0, %8, %3, %5, %6, %2, %7, %4, %1 : tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>
  }
}
