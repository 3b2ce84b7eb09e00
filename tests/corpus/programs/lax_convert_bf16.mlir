module @jit_lax_convert_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x48xbf16>) -> (tensor<32x48xi1> {jax.result_info = "result['bool']"}, tensor<32x48xf16> {jax.result_info = "result['f16']"}, tensor<32x48xf32> {jax.result_info = "result['f32']"}, tensor<32x48xi16> {jax.result_info = "result['i16']"}, tensor<32x48xi32> {jax.result_info = "result['i32']"}, tensor<32x48xi8> {jax.result_info = "result['i8']"}) {
    %0 = stablehlo.convert %arg0 : (tensor<32x48xbf16>) -> tensor<32x48xi8>
    %1 = stablehlo.convert %arg0 : (tensor<32x48xbf16>) -> tensor<32x48xi16>
    %2 = stablehlo.convert %arg0 : (tensor<32x48xbf16>) -> tensor<32x48xi32>
    %3 = stablehlo.convert %arg0 : (tensor<32x48xbf16>) -> tensor<32x48xf16>
    %4 = stablehlo.convert %arg0 : (tensor<32x48xbf16>) -> tensor<32x48xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<32x48xbf16>
    %6 = stablehlo.compare NE, %arg0, %5, FLOAT : (tensor<32x48xbf16>, tensor<32x48xbf16>) -> tensor<32x48xi1>
    %7 = stablehlo.convert %6 : tensor<32x48xi1>
    return %7, %3, %4, %1, %2, %0 : tensor<32x48xi1>, tensor<32x48xf16>, tensor<32x48xf32>, tensor<32x48xi16>, tensor<32x48xi32>, tensor<32x48xi8>
  }
}
