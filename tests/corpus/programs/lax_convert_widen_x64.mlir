module @jit_lax_convert_widen_x64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi8>, %arg1: tensor<32x48xi16>, %arg2: tensor<32x48xi32>, %arg3: tensor<32x48xf16>, %arg4: tensor<32x48xbf16>, %arg5: tensor<32x48xf32>) -> (tensor<32x48xf64> {jax.result_info = "result['bf16_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['bf16_to_i64']"}, tensor<32x48xf64> {jax.result_info = "result['f16_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['f16_to_i64']"}, tensor<32x48xf64> {jax.result_info = "result['f32_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['f32_to_i64']"}, tensor<32x48xf64> {jax.result_info = "result['i16_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['i16_to_i64']"}, tensor<32x48xf64> {jax.result_info = "result['i32_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['i32_to_i64']"}, tensor<32x48xf64> {jax.result_info = "result['i8_to_f64']"}, tensor<32x48xi64> {jax.result_info = "result['i8_to_i64']"}) {
    %0 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xi64>
    %1 = stablehlo.convert %arg0 : (tensor<32x48xi8>) -> tensor<32x48xf64>
    %2 = stablehlo.convert %arg1 : (tensor<32x48xi16>) -> tensor<32x48xi64>
    %3 = stablehlo.convert %arg1 : (tensor<32x48xi16>) -> tensor<32x48xf64>
    %4 = stablehlo.convert %arg2 : (tensor<32x48xi32>) -> tensor<32x48xi64>
    %5 = stablehlo.convert %arg2 : (tensor<32x48xi32>) -> tensor<32x48xf64>
    %6 = stablehlo.convert %arg3 : (tensor<32x48xf16>) -> tensor<32x48xi64>
    %7 = stablehlo.convert %arg3 : (tensor<32x48xf16>) -> tensor<32x48xf64>
    %8 = stablehlo.convert %arg4 : (tensor<32x48xbf16>) -> tensor<32x48xi64>
    %9 = stablehlo.convert %arg4 : (tensor<32x48xbf16>) -> tensor<32x48xf64>
    %10 = stablehlo.convert %arg5 : (tensor<32x48xf32>) -> tensor<32x48xi64>
    %11 = stablehlo.convert %arg5 : (tensor<32x48xf32>) -> tensor<32x48xf64>
    return %9, %8, %7, %6, %11, %10, %3, %2, %5, %4, %1, %0 : tensor<32x48xf64>, tensor<32x48xi64>, tensor<32x48xf64>, tensor<32x48xi64>, tensor<32x48xf64>, tensor<32x48xi64>, tensor<32x48xf64>, tensor<32x48xi64>, tensor<32x48xf64>, tensor<32x48xi64>, tensor<32x48xf64>, tensor<32x48xi64>
  }
}
