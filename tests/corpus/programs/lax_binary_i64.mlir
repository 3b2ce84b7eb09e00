module @jit_lax_binary_i64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi64>, %arg1: tensor<32x48xi64>, %arg2: tensor<32x48xi64>) -> (tensor<32x48xi64> {jax.result_info = "result['add']"}, tensor<32x48xi64> {jax.result_info = "result['div']"}, tensor<32x48xi64> {jax.result_info = "result['max']"}, tensor<32x48xi64> {jax.result_info = "result['min']"}, tensor<32x48xi64> {jax.result_info = "result['mul']"}, tensor<32x48xi64> {jax.result_info = "result['rem']"}, tensor<32x48xi64> {jax.result_info = "result['sub']"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<32x48xi64>
    %1 = stablehlo.subtract %arg0, %arg1 : tensor<32x48xi64>
    %2 = stablehlo.multiply %arg0, %arg1 : tensor<32x48xi64>
    %3 = stablehlo.divide %arg0, %arg2 : tensor<32x48xi64>
    %4 = stablehlo.remainder %arg0, %arg2 : tensor<32x48xi64>
    %5 = stablehlo.maximum %arg0, %arg1 : tensor<32x48xi64>
    %6 = stablehlo.minimum %arg0, %arg1 : tensor<32x48xi64>
    return %0, %3, %5, %6, %2, %4, %1 : tensor<32x48xi64>, tensor<32x48xi64>, tensor<32x48xi64>, tensor<32x48xi64>, tensor<32x48xi64>, tensor<32x48xi64>, tensor<32x48xi64>
  }
}
