// LayerNorm over the last dim: (x - mean) / sqrt(var + 1e-5) * gamma + beta.
// Fusion: one softmax-like group (mean, then variance of the centred row).
func.func @main(%x: tensor<128x768xf32>, %gamma: tensor<768xf32>, %beta: tensor<768xf32>)
    -> tensor<128x768xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<768.0> : tensor<128xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<128xf32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x768xf32>, tensor<f32>) -> tensor<128xf32>
  %mean = stablehlo.divide %sum, %n : tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<128xf32>) -> tensor<128x768xf32>
  %c = stablehlo.subtract %x, %mb : tensor<128x768xf32>
  %sq = stablehlo.multiply %c, %c : tensor<128x768xf32>
  %vsum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x768xf32>, tensor<f32>) -> tensor<128xf32>
  %var = stablehlo.divide %vsum, %n : tensor<128xf32>
  %ve = stablehlo.add %var, %eps : tensor<128xf32>
  %rstd = stablehlo.rsqrt %ve : tensor<128xf32>
  %rb = stablehlo.broadcast_in_dim %rstd, dims = [0] : (tensor<128xf32>) -> tensor<128x768xf32>
  %norm = stablehlo.multiply %c, %rb : tensor<128x768xf32>
  %g = stablehlo.broadcast_in_dim %gamma, dims = [1] : (tensor<768xf32>) -> tensor<128x768xf32>
  %b = stablehlo.broadcast_in_dim %beta, dims = [1] : (tensor<768xf32>) -> tensor<128x768xf32>
  %scaled = stablehlo.multiply %norm, %g : tensor<128x768xf32>
  %y = stablehlo.add %scaled, %b : tensor<128x768xf32>
  return %y : tensor<128x768xf32>
}
