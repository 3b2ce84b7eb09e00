// Column sum of seed 002: 8192x50257 f16 logits, converted to f32 and summed
// over the rows (dim 0) into f32[50257]. The kept dim (50257, a vocabulary)
// is contiguous and divides no tile; the reduced dim is the outer one.
func.func @main(%x: tensor<8192x50257xf16>) -> tensor<50257xf32> {
  %c = stablehlo.convert %x : (tensor<8192x50257xf16>) -> tensor<8192x50257xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%c init: %zero) applies stablehlo.add across dimensions = [0]
    : (tensor<8192x50257xf32>, tensor<f32>) -> tensor<50257xf32>
  return %sum : tensor<50257xf32>
}
