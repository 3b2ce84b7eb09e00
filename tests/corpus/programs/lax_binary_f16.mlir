module @jit_lax_binary_f16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xf16>, %arg1: tensor<32x48xf16>, %arg2: tensor<32x48xf16>, %arg3: tensor<32x48xf16>) -> (tensor<32x48xf16> {jax.result_info = "result['add']"}, tensor<32x48xf16> {jax.result_info = "result['atan2']"}, tensor<32x48xf16> {jax.result_info = "result['div']"}, tensor<32x48xf16> {jax.result_info = "result['max']"}, tensor<32x48xf16> {jax.result_info = "result['min']"}, tensor<32x48xf16> {jax.result_info = "result['mul']"}, tensor<32x48xf16> {jax.result_info = "result['pow']"}, tensor<32x48xf16> {jax.result_info = "result['rem']"}, tensor<32x48xf16> {jax.result_info = "result['sub']"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<32x48xf16>
    %1 = stablehlo.subtract %arg0, %arg1 : tensor<32x48xf16>
    %2 = stablehlo.multiply %arg0, %arg1 : tensor<32x48xf16>
    %3 = stablehlo.divide %arg0, %arg2 : tensor<32x48xf16>
    %4 = stablehlo.remainder %arg0, %arg2 : tensor<32x48xf16>
    %5 = stablehlo.maximum %arg0, %arg1 : tensor<32x48xf16>
    %6 = stablehlo.minimum %arg0, %arg1 : tensor<32x48xf16>
    %7 = stablehlo.power %arg3, %arg1 : tensor<32x48xf16>
    %8 = stablehlo.atan2 %arg0, %arg1 : tensor<32x48xf16>
    return %0, %8, %3, %5, %6, %2, %7, %4, %1 : tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>, tensor<32x48xf16>
  }
}
