module @jit_lax_convert_i64 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xi64>) -> (tensor<32x48xbf16> {jax.result_info = "result['bf16']"}, tensor<32x48xi1> {jax.result_info = "result['bool']"}, tensor<32x48xf16> {jax.result_info = "result['f16']"}, tensor<32x48xf32> {jax.result_info = "result['f32']"}, tensor<32x48xf64> {jax.result_info = "result['f64']"}, tensor<32x48xi16> {jax.result_info = "result['i16']"}, tensor<32x48xi32> {jax.result_info = "result['i32']"}, tensor<32x48xi8> {jax.result_info = "result['i8']"}) {
    %0 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xi8>
    %1 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xi16>
    %2 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xi32>
    %3 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xf16>
    %4 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xbf16>
    %5 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xf32>
    %6 = stablehlo.convert %arg0 : (tensor<32x48xi64>) -> tensor<32x48xf64>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %7 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<32x48xi64>
    %8 = stablehlo.compare NE, %arg0, %7, SIGNED : (tensor<32x48xi64>, tensor<32x48xi64>) -> tensor<32x48xi1>
    %9 = stablehlo.convert %8 : tensor<32x48xi1>
    return %4, %9, %3, %5, %6, %1, %2, %0 : tensor<32x48xbf16>, tensor<32x48xi1>, tensor<32x48xf16>, tensor<32x48xf32>, tensor<32x48xf64>, tensor<32x48xi16>, tensor<32x48xi32>, tensor<32x48xi8>
  }
}
