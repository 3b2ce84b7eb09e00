// Small variant of samples/gelu_bf16.mlir (GELU, bf16 2x16x256) for `tilefuse bench --small`.
func.func @main(%x: tensor<2x16x256xbf16>) -> tensor<2x16x256xbf16> {
  %half = stablehlo.constant dense<5.000000e-01> : tensor<2x16x256xbf16>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<2x16x256xbf16>
  %c = stablehlo.constant dense<7.978845e-01> : tensor<2x16x256xbf16>
  %k = stablehlo.constant dense<4.471500e-02> : tensor<2x16x256xbf16>
  %x2 = stablehlo.multiply %x, %x : tensor<2x16x256xbf16>
  %x3 = stablehlo.multiply %x2, %x : tensor<2x16x256xbf16>
  %t0 = stablehlo.multiply %k, %x3 : tensor<2x16x256xbf16>
  %t1 = stablehlo.add %x, %t0 : tensor<2x16x256xbf16>
  %t2 = stablehlo.multiply %c, %t1 : tensor<2x16x256xbf16>
  %t3 = stablehlo.tanh %t2 : tensor<2x16x256xbf16>
  %t4 = stablehlo.add %one, %t3 : tensor<2x16x256xbf16>
  %t5 = stablehlo.multiply %half, %x : tensor<2x16x256xbf16>
  %y = stablehlo.multiply %t5, %t4 : tensor<2x16x256xbf16>
  return %y : tensor<2x16x256xbf16>
}
