// Small variant of samples/column_sum_f16.mlir (column sum, f16 64x50257
// summed in f32 over dim 0) for tests and `tilefuse bench --small`.
func.func @main(%x: tensor<64x50257xf16>) -> tensor<50257xf32> {
  %c = stablehlo.convert %x : (tensor<64x50257xf16>) -> tensor<64x50257xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%c init: %zero) applies stablehlo.add across dimensions = [0]
    : (tensor<64x50257xf32>, tensor<f32>) -> tensor<50257xf32>
  return %sum : tensor<50257xf32>
}
