// Single-head attention: softmax(q k^T / sqrt(64)) v, k^T folded into dot_general.
// Fusion: matmul (scores, scaled), softmax-like (the rows), matmul (weights x v).
func.func @main(%q: tensor<128x64xf32>, %k: tensor<128x64xf32>, %v: tensor<128x64xf32>)
    -> tensor<128x64xf32> {
  %scale = stablehlo.constant dense<0.125> : tensor<128x128xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s0 = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1]
      : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<128x128xf32>
  %s = stablehlo.multiply %s0, %scale : tensor<128x128xf32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %d = stablehlo.subtract %s, %mb : tensor<128x128xf32>
  %e = stablehlo.exponential %d : tensor<128x128xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %p = stablehlo.divide %e, %sb : tensor<128x128xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0]
      : (tensor<128x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  return %o : tensor<128x64xf32>
}
