module @jit_lax_unary_i32 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi32>) -> (tensor<32x48xi32> {jax.result_info = "result['abs']"}, tensor<32x48xi32> {jax.result_info = "result['clz']"}, tensor<32x48xi32> {jax.result_info = "result['neg']"}, tensor<32x48xi32> {jax.result_info = "result['not']"}, tensor<32x48xi32> {jax.result_info = "result['popcnt']"}, tensor<32x48xi32> {jax.result_info = "result['sign']"}) {
    %0 = stablehlo.negate %arg0 : tensor<32x48xi32>
    %1 = stablehlo.abs %arg0 : tensor<32x48xi32>
    %2 = stablehlo.sign %arg0 : tensor<32x48xi32>
    %3 = stablehlo.not %arg0 : tensor<32x48xi32>
    %4 = stablehlo.popcnt %arg0 : tensor<32x48xi32>
    %5 = stablehlo.count_leading_zeros %arg0 : tensor<32x48xi32>
    return %1, %5, %0, %3, %4, %2 : tensor<32x48xi32>, tensor<32x48xi32>, tensor<32x48xi32>, tensor<32x48xi32>, tensor<32x48xi32>, tensor<32x48xi32>
  }
}
