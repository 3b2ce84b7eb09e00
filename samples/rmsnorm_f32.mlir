// RMSNorm over the last dim: x * rsqrt(mean(x^2) + 1e-6) * w.
// Fusion: one softmax-like group (one reduction, broadcast back over the row).
func.func @main(%x: tensor<128x1024xf32>, %w: tensor<1024xf32>) -> tensor<128x1024xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<1024.0> : tensor<128xf32>
  %eps = stablehlo.constant dense<1.0e-6> : tensor<128xf32>
  %sq = stablehlo.multiply %x, %x : tensor<128x1024xf32>
  %ss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x1024xf32>, tensor<f32>) -> tensor<128xf32>
  %ms = stablehlo.divide %ss, %n : tensor<128xf32>
  %mse = stablehlo.add %ms, %eps : tensor<128xf32>
  %r = stablehlo.rsqrt %mse : tensor<128xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<128xf32>) -> tensor<128x1024xf32>
  %wb = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<1024xf32>) -> tensor<128x1024xf32>
  %xn = stablehlo.multiply %x, %rb : tensor<128x1024xf32>
  %y = stablehlo.multiply %xn, %wb : tensor<128x1024xf32>
  return %y : tensor<128x1024xf32>
}
