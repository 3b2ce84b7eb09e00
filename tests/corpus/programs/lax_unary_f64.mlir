module @jit_lax_unary_f64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xf64>, %arg1: tensor<32x48xf64>) -> (tensor<32x48xf64> {jax.result_info = "result['abs']"}, tensor<32x48xf64> {jax.result_info = "result['ceil']"}, tensor<32x48xf64> {jax.result_info = "result['floor']"}, tensor<32x48xi1> {jax.result_info = "result['is_finite']"}, tensor<32x48xf64> {jax.result_info = "result['neg']"}, tensor<32x48xf64> {jax.result_info = "result['round_afz']"}, tensor<32x48xf64> {jax.result_info = "result['round_even']"}, tensor<32x48xf64> {jax.result_info = "result['sign']"}) {
    %0 = stablehlo.negate %arg0 : tensor<32x48xf64>
    %1 = stablehlo.abs %arg0 : tensor<32x48xf64>
    %2 = stablehlo.sign %arg0 : tensor<32x48xf64>
    %3 = stablehlo.floor %arg0 : tensor<32x48xf64>
    %4 = stablehlo.ceil %arg0 : tensor<32x48xf64>
    %5 = stablehlo.round_nearest_afz %arg0 : tensor<32x48xf64>
    %6 = stablehlo.round_nearest_even %arg0 : tensor<32x48xf64>
    %7 = stablehlo.is_finite %arg1 : (tensor<32x48xf64>) -> tensor<32x48xi1>
    return %1, %4, %3, %7, %0, %5, %6, %2 : tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xi1>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>, tensor<32x48xf64>
  }
}
