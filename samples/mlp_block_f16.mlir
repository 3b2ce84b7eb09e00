// Transformer MLP block in f16, as JAX writes it: every dot_general takes and
// returns f16 (tensor cores on CUDA: the matmul_mma kernel; vector FMAs on
// Vulkan). gelu(x @ w1 + b1) @ w2 + b2 (tanh GELU).
// Fusion: two matmul groups, each with its elementwise epilogue.
func.func @main(%x: tensor<64x256xf16>, %w1: tensor<256x1024xf16>, %b1: tensor<1024xf16>,
                %w2: tensor<1024x256xf16>, %b2: tensor<256xf16>) -> tensor<64x256xf16> {
  %half = stablehlo.constant dense<0.5> : tensor<64x1024xf16>
  %one = stablehlo.constant dense<1.0> : tensor<64x1024xf16>
  %c = stablehlo.constant dense<0.7978845608> : tensor<64x1024xf16>
  %k = stablehlo.constant dense<0.044715> : tensor<64x1024xf16>
  %h0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
      : (tensor<64x256xf16>, tensor<256x1024xf16>) -> tensor<64x1024xf16>
  %bb1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<1024xf16>) -> tensor<64x1024xf16>
  %h = stablehlo.add %h0, %bb1 : tensor<64x1024xf16>
  %h2 = stablehlo.multiply %h, %h : tensor<64x1024xf16>
  %h3 = stablehlo.multiply %h2, %h : tensor<64x1024xf16>
  %kh3 = stablehlo.multiply %k, %h3 : tensor<64x1024xf16>
  %inner = stablehlo.add %h, %kh3 : tensor<64x1024xf16>
  %arg = stablehlo.multiply %c, %inner : tensor<64x1024xf16>
  %t = stablehlo.tanh %arg : tensor<64x1024xf16>
  %onet = stablehlo.add %one, %t : tensor<64x1024xf16>
  %hh = stablehlo.multiply %half, %h : tensor<64x1024xf16>
  %g = stablehlo.multiply %hh, %onet : tensor<64x1024xf16>
  %y0 = stablehlo.dot_general %g, %w2, contracting_dims = [1] x [0]
      : (tensor<64x1024xf16>, tensor<1024x256xf16>) -> tensor<64x256xf16>
  %bb2 = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<256xf16>) -> tensor<64x256xf16>
  %y = stablehlo.add %y0, %bb2 : tensor<64x256xf16>
  return %y : tensor<64x256xf16>
}
