// The "matmul" kernel: a contraction and its elementwise epilogue (bias,
// activation, residual) in one dispatch, register-blocked, FMA on vectors.
//
// Applies to a dispatch holding a linalg.fill, the contraction it
// initializes (a matmul, batch_matmul or vecmat, generalized by IREE before
// this runs) and an elementwise root reading the contraction's result, or
// the contraction alone. The optional steps are chosen per dispatch by the
// chooser: "kernel", exact tiles (@tilefuse_matmul_exact) or ragged ones
// (@tilefuse_matmul_ragged, second half of this file); within the exact
// kernel "tile", "epilogue_rows", "fill_rows", "k_rows": with or without an
// epilogue, with or without an M loop. Each workgroup computes a
// TM x TN tile of the root (one batch element per workgroup); each thread a
// tm x tn tile of it, held in registers as tm rows of 1-D vectors across
// the K loop, and the epilogue is applied to those registers before the one
// store. Nothing goes through global memory between the contraction and its
// epilogue.
//
// The exact kernel's tiles divide the shapes (the chooser picks divisors,
// python/tilefuse/strategies/matmul.py): every tensor between fill,
// contraction and epilogue is then static, all transfers are unmasked, and
// the K loop's reads and writes of the accumulator fold into loop-carried
// vectors. (With a masked tile this LLVM forwards neither the accumulator's
// first read nor the epilogue's read of the result, and bufferization copies
// the whole tile per thread: found by trying it.) The ragged kernel keeps
// that static accumulator and masks only the operands' reads and the store.
//
// The values below are the defaults for a 64x256x128 f32 matmul; the driver
// sets every attribute tagged `tilefuse.param`:
//   matmul_operand     position of the root's input the contraction produces
//   workgroup_tile     [TM, TN] of the root per workgroup
//   thread_tile        [tm, tn] of the root per thread
//   k_step             [0, 0, KS]: the K loop's step
//   rows, k_rows       [1, v] (v = vector width; k_rows adds K's 0): each
//                      thread's op split into one-row, v-wide pieces, then
//                      unrolled (SPIR-V takes 1-D vectors of at most 4)
//   m_unroll, n_unroll the trip counts of those two loops (tm, tn / v)
// (A batch loop adds a leading 1 to workgroup_tile and 0 to the others; no
// M loop drops the M entries.)
//   workgroup_dims, translation_info: [TN / tn, TM / tm, 1] threads
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)

  // Step "tile", with an epilogue: tile the root (the epilogue) to
  // workgroups, TM x TN each, and fuse the contraction, its fill and the
  // loads into the tile (a workgroup reads only the rows of A and columns of
  // B it needs); then to threads, tm x tn each, fusing the contraction and
  // fill again, so that the epilogue reads its own thread's accumulator
  // (registers), never memory. Yields the thread's contraction, fill and
  // epilogue.
  transform.named_sequence @tilefuse_matmul_tile_epilogue(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    %fill = transform.get_producer_of_operand %matmul[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [32, 32] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_matmul, %grid_1 = transform.structured.fuse_into_containing_op %matmul into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_2 = transform.structured.fuse_into_containing_op %fill into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %grid_p = transform.include @tilefuse_matmul_no_source failures(propagate) (%wg_matmul, %grid_2)
        {tilefuse.step = "prologues"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %wg_loads, %grid_3 = transform.structured.fuse_into_containing_op %loads into %grid_p
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_3
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %t_root, %threads = transform.structured.tile_using_forall %wg_root
        tile_sizes [4, 4] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
        {tilefuse.param = "thread_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_matmul, %threads_1 = transform.structured.fuse_into_containing_op %wg_matmul into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_fill, %threads_2 = transform.structured.fuse_into_containing_op %wg_fill into %threads_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %threads_3 = transform.include @tilefuse_matmul_no_source failures(propagate) (%t_matmul, %threads_2)
        {tilefuse.step = "prologues"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %t_matmul, %t_fill, %t_root : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "tile", a bare contraction (the root itself): the same tiles, with
  // only the fill and the loads to fuse. Yields the thread's contraction
  // twice (as the epilogue too: step "epilogue_rows" skips it).
  transform.named_sequence @tilefuse_matmul_tile_bare(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %fill = transform.get_producer_of_operand %root[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %root
        tile_sizes [32, 32] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_1 = transform.structured.fuse_into_containing_op %fill into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %grid_p = transform.include @tilefuse_matmul_no_source failures(propagate) (%wg_matmul, %grid_1)
        {tilefuse.step = "prologues"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %wg_loads, %grid_2 = transform.structured.fuse_into_containing_op %loads into %grid_p
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_2
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %t_matmul, %threads = transform.structured.tile_using_forall %wg_matmul
        tile_sizes [4, 4] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
        {tilefuse.param = "thread_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_fill, %threads_1 = transform.structured.fuse_into_containing_op %wg_fill into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %threads_2 = transform.include @tilefuse_matmul_no_source failures(propagate) (%t_matmul, %threads_1)
        {tilefuse.step = "prologues"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %t_matmul, %t_fill, %t_matmul : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Steps "epilogue_rows", "fill_rows" and "k_rows": a thread's op in
  // one-row, v-wide pieces, the loops unrolled (innermost first, so that the
  // outer unroll copies an unrolled body). The epilogue's pieces then read
  // the accumulator pieces the contraction left in registers, and every
  // vector is 1-D. The _1d forms are for a contraction with no M loop
  // (M = 1: IREE's vecmat), where the thread's tile is one row already; a
  // bare contraction has no epilogue (@tilefuse_skip).
  transform.named_sequence @tilefuse_matmul_rows(%op: !transform.any_op {transform.consumed}) {
    %row, %m_loop, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [1, 4] {tilefuse.param = "rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.loop.unroll %m_loop factor = 4 {tilefuse.param = "m_unroll"} : !transform.any_op
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_rows_1d(%op: !transform.any_op {transform.consumed}) {
    %row, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [4] {tilefuse.param = "rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.yield
  }

  // With prologues (steps "a_rows", "b_rows"), A's is fused per row and
  // B's per piece before the unroll: unrolled, the pieces that read one
  // slice compute it alike, and CSE keeps one.
  transform.named_sequence @tilefuse_matmul_k_rows(%op: !transform.any_op {transform.consumed}) {
    %row, %m_loop, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [1, 4, 0] {tilefuse.param = "k_rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %m_loop_1 = transform.include @tilefuse_matmul_no_source failures(propagate) (%row, %m_loop)
        {tilefuse.step = "a_rows"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %n_loop_1 = transform.include @tilefuse_matmul_no_source failures(propagate) (%row, %n_loop)
        {tilefuse.step = "b_rows"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %m_outer = transform.get_parent_op %n_loop_1 <{op_name = "scf.for"}>
      : (!transform.any_op) -> !transform.any_op
    transform.loop.unroll %n_loop_1 factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.loop.unroll %m_outer factor = 4 {tilefuse.param = "m_unroll"} : !transform.any_op
    transform.yield
  }

  // With no M loop A is the K step's slice of one row, its prologue fused
  // into the K loop already; B's is fused per piece.
  transform.named_sequence @tilefuse_matmul_k_rows_1d(%op: !transform.any_op {transform.consumed}) {
    %row, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [4, 0] {tilefuse.param = "k_rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %n_loop_1 = transform.include @tilefuse_matmul_no_source failures(propagate) (%row, %n_loop)
        {tilefuse.step = "b_rows"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    transform.loop.unroll %n_loop_1 factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.yield
  }

  // Step "prologues": the operands' prologues (steps "a_prologue",
  // "b_prologue": an operand computed in the dispatch from loads, or none)
  // fused into `loop` around `op`, the contraction at one level of tiling;
  // or (@tilefuse_matmul_no_source) nothing, where neither has one.
  transform.named_sequence @tilefuse_matmul_prologues(
      %op: !transform.any_op {transform.readonly}, %loop: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    %loop_a = transform.include @tilefuse_matmul_no_source failures(propagate) (%op, %loop)
        {tilefuse.step = "a_prologue"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %loop_b = transform.include @tilefuse_matmul_no_source failures(propagate) (%op, %loop_a)
        {tilefuse.step = "b_prologue"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    transform.yield %loop_b : !transform.any_op
  }

  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  // The kernel chosen for the dispatch (step "kernel"): exact tiles
  // (@tilefuse_matmul_exact, below) or ragged ones (@tilefuse_matmul_ragged,
  // further below).
  transform.named_sequence @tilefuse_matmul(%dispatch: !transform.any_op {transform.readonly}) {
    transform.include @tilefuse_matmul_exact failures(propagate) (%dispatch)
        {tilefuse.step = "kernel"} : (!transform.any_op) -> ()
    transform.yield
  }

  // The kernel on tiles that divide M, N and K: every tensor static, no
  // masks.
  transform.named_sequence @tilefuse_matmul_exact(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. The root: the op whose result the dispatch stores (the
    // epilogue, or the contraction itself).
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Workgroup and thread tiles (the step chosen for the dispatch:
    // with an epilogue or bare, above).
    %t_matmul, %t_fill, %t_epilogue = transform.include @tilefuse_matmul_tile_epilogue
        failures(propagate) (%func, %root) {tilefuse.step = "tile"}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // Step 3. One op per output row and vector (the steps above): the
    // epilogue, the fill and the K step's contraction (step 4) are each
    // tiled into one-row, v-wide pieces. The row slices each writes are then
    // the ones the next reads (the folds of step 5 match them), and every
    // vector is 1-D (SPIR-V takes 1-D vectors of at most 4 elements).
    transform.include @tilefuse_matmul_rows failures(propagate) (%t_epilogue)
        {tilefuse.step = "epilogue_rows"} : (!transform.any_op) -> ()
    transform.include @tilefuse_matmul_rows failures(propagate) (%t_fill)
        {tilefuse.step = "fill_rows"} : (!transform.any_op) -> ()

    // Step 4. The K loop: per step, a tm x tn x KS contraction, in row
    // pieces. Tagged, since vectorizing (step 5) consumes every handle into
    // the function.
    %k_matmul, %k_loop = transform.structured.tile_using_for %t_matmul tile_sizes [0, 0, 4]
        {tilefuse.param = "k_step"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %k_loop_1 = transform.include @tilefuse_matmul_no_source failures(propagate) (%k_matmul, %k_loop)
        {tilefuse.step = "prologues"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    transform.annotate %k_loop_1 "tilefuse.k_loop" : !transform.any_op
    transform.include @tilefuse_matmul_k_rows failures(propagate) (%k_matmul)
        {tilefuse.step = "k_rows"} : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 5. Vectorize (every shape static: no masks). The generic
    // contraction comes out as a multiply and a multi_reduction;
    // reduction_to_contract makes it a vector.contract again, and the
    // transfers of one row slice written then read fold away.
    %vfunc = transform.structured.vectorize_children_and_apply_patterns %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // Step 6. The accumulator rows: the K loop reads and writes the same row
    // slices of its carried tile every step; hoisting makes them
    // loop-carried vectors (registers), read before and written after it.
    %k_loop_again = transform.structured.match attributes {"tilefuse.k_loop"} in %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %k_loop_again : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // Step 7. Bufferize: the thread's epilogue writes straight into the
    // output binding.
    transform.iree.eliminate_empty_tensors %vfunc : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 8. Map the foralls onto workgroup ids and thread ids.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [8, 8, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()

    // Step 9. Each contraction becomes outer products over K, each outer
    // product one vector.fma per row.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 10. Finished: no further codegen pipeline, this workgroup size.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 8, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %bufferized "translation_info" = %done
      : !transform.any_op, !transform.any_param

    // Step 11. Print the kernel: the driver checks it (kernel/verify.py).
    transform.print %bufferized : !transform.any_op
    transform.yield
  }
  // ---------------------------------------------------------------------
  // The ragged kernel (step "kernel" = @tilefuse_matmul_ragged): tiles that
  // need not divide M, N or K, for shapes whose exact tiling is degenerate
  // (matmul.py's ragged_params says when). The edges are handled inside the
  // dispatch, with masks, and every thread keeps a static tm x tn
  // accumulator in registers, as in the exact kernel (in the contraction's
  // result type: f16/bf16 operands may accumulate in f32, their pads then
  // f16/bf16 and the accumulator's f32, and the epilogue's convert back
  // runs on the registers before the one store):
  //   - threads by num_threads: a static thread count, each thread's tile at
  //     most tm x tn (smaller at the edges);
  //   - the thread's contraction padded to tm x tn (and K to a multiple of
  //     its step) with pad_tiling_interface, then its epilogue (whose read of
  //     the contraction then folds to the padded result), and only then the
  //     fill fused in (its pad folds to a static fill);
  //   - the operand pads fused into the K loop, then into the row pieces
  //     (A per row, B per row piece), each vectorized with vector_sizes: a
  //     masked read (vector.mask + create_mask over every dim, the row's
  //     bound included), never an in_bounds=false read;
  //   - the epilogue's other inputs (bias, residual) likewise masked; the
  //     epilogue (or, for a bare contraction, a copy standing in for it)
  //     vectorized whole, its write into the output's pad folded into a
  //     write of the output itself (linalg.pad_vectorization), then cut into
  //     the row pieces (gpu.unroll_vectors_subgroup_mma);
  //   - after bufferization, the remaining 2-D transfers unrolled to rows
  //     (transfer_to_scf): masked reads get each row's 1-D mask (all false
  //     past M), the store gets a guard per row and a column mask.
  // (docs/findings.md, 'Ragged tiles for the FMA matmul, third attempt'.)
  // Parameters (matmul.py, attributes()): workgroup_tile and matmul_operand
  // as above; r_threads (threads per dim, num_threads); r_matmul_pad
  // ([.., tm, tn, Kp]) and r_root_pad ([.., tm, tn]); rows, m_unroll,
  // n_unroll, k_step, k_rows as above; a_pad_vector / b_pad_vector (the
  // vector of one A row piece / B piece); r_root_init (the root's init
  // operand, skipped when finding its input pads); r_pad_type_N and
  // r_pad_vector_N (the padded shapes an epilogue input can have, in the
  // epilogue inputs' element type, which need not be the accumulator's, and
  // their vectors); r_unroll ([1, v, 1]); workgroup_dims, translation_info.
  // Its optional steps: "r_tile" (epilogue or bare), "r_fill_rows",
  // "r_k_rows" (with "a_rows"/"b_rows" inside it), "a_pads"/"b_pads" (an
  // operand that needs no pad has no pad to fuse or to read masked).
  // With no M loop (M = 1, IREE's vecmat) the tiles are of N alone and a
  // thread's tile is one row piece of v: the parameters drop their M
  // entries (A's piece is [KS]), and "r_fill_rows" and "r_k_rows" are
  // skipped (the fill, the K step's contraction and the root are one
  // v-wide vector each; A's pad of one K step is read once per step).
  transform.named_sequence @tilefuse_matmul_ragged(%dispatch: !transform.any_op {transform.readonly}) {
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // R1. Workgroup tiles (step "r_tile": with an epilogue, or bare, where
    // a copy of the product into the output becomes the root).
    %wg_root, %wg_matmul, %wg_fill = transform.include @tilefuse_matmul_ragged_tile_epilogue
        failures(propagate) (%func, %root) {tilefuse.step = "r_tile"}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // R2. Threads: a static count of them, ragged tiles at the edges.
    %t_root, %threads = transform.structured.tile_using_forall %wg_root
        num_threads [8, 8] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
        {tilefuse.param = "r_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_matmul, %threads_1 = transform.structured.fuse_into_containing_op %wg_matmul into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // R3. Static thread tiles: the contraction padded, then the root, then
    // the fill fused (in this order: the root's read of the product folds
    // to the padded product only while the product's init is the pad of a
    // slice; the fill's pad then folds to a static fill).
    %p_matmul, %matmul_pads = transform.structured.pad_tiling_interface %t_matmul
        to padding_sizes [8, 8, 8] {tilefuse.param = "r_matmul_pad"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %p_root, %root_pads = transform.structured.pad_tiling_interface %t_root
        to padding_sizes [8, 8] {tilefuse.param = "r_root_pad"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_fill, %threads_2 = transform.structured.fuse_into_containing_op %wg_fill into %threads_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %s_fill = transform.get_producer_of_operand %p_matmul[2] : (!transform.any_op) -> !transform.any_op
    transform.include @tilefuse_matmul_rows failures(propagate) (%s_fill)
        {tilefuse.step = "r_fill_rows"} : (!transform.any_op) -> ()

    // R4. The K loop, the operand pads fused into it (one K step of A and
    // B each; a slice, cloned, where an operand needs no pad).
    %a_pad = transform.get_producer_of_operand %p_matmul[0] : (!transform.any_op) -> !transform.any_op
    %b_pad = transform.get_producer_of_operand %p_matmul[1] : (!transform.any_op) -> !transform.any_op
    %k_matmul, %k_loop = transform.structured.tile_using_for %p_matmul tile_sizes [0, 0, 4]
        {tilefuse.param = "k_step"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %k_a, %k_loop_1 = transform.structured.fuse_into_containing_op %a_pad into %k_loop
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %k_b, %k_loop_2 = transform.structured.fuse_into_containing_op %b_pad into %k_loop_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.annotate %k_loop_2 "tilefuse.k_loop" : !transform.any_op
    // A fused pad comes back as `scf.if (empty slice) {generate} else
    // {pad}`; the else branch is right in both cases (docs/findings.md, 'A
    // fused pad').
    %k_guards = transform.structured.match ops{["scf.if"]} in %k_loop_2
      : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %k_guards take_else_branch : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // R5. The K step in row pieces (step "r_k_rows", below; with no M loop
    // the thread's one row of v is the piece already: skipped).
    // Canonicalization and tiling canonicalization run in sets of their own
    // here: together they ran out of memory (100x101x99).
    transform.include @tilefuse_matmul_ragged_k_rows failures(propagate) (%k_matmul)
        {tilefuse.step = "r_k_rows"} : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // R6. The operand pads as masked reads (steps "a_pads", "b_pads": an
    // operand that needs no pad has none).
    %k_loop_3 = transform.structured.match attributes {"tilefuse.k_loop"} in %func
      : (!transform.any_op) -> !transform.any_op
    %k_rows = transform.structured.match interface{LinalgOp} in %k_loop_3
      : (!transform.any_op) -> !transform.any_op
    transform.include @tilefuse_matmul_a_pads failures(propagate) (%k_rows)
        {tilefuse.step = "a_pads"} : (!transform.any_op) -> ()
    transform.include @tilefuse_matmul_b_pads failures(propagate) (%k_rows)
        {tilefuse.step = "b_pads"} : (!transform.any_op) -> ()

    // R7. The root's other inputs' pads as masked reads (each input's pad
    // is matched by its padded type, whose element is the epilogue inputs'
    // (bf16 for a bias of a bf16 product accumulated in f32), not the
    // accumulator's: matched as f32, 77x130x96's bf16 residual pad was left
    // to pad_vectorization, read under row guards whose vector<1x4xbf16>
    // zeros SPIR-V could not legalize; an input needing no pad has none), then
    // the root vectorized whole, and its write into the output's pad folded
    // into a write of the output slice (out of bounds where the tile is
    // ragged: rows guarded and columns masked in R10). Nothing else may be
    // left as a tensor.pad: pad_vectorization would read it with
    // in_bounds=false flags, which lose the row's.
    %root_inputs = transform.get_operand %p_root[except(2)] {tilefuse.param = "r_root_init"}
      : (!transform.any_op) -> !transform.any_value
    %root_defs_all = transform.get_defining_op %root_inputs
      : (!transform.any_value) -> !transform.any_op
    %root_defs = transform.merge_handles deduplicate %root_defs_all : !transform.any_op
    transform.foreach %root_defs : !transform.any_op {
    ^bb0(%def: !transform.any_op):
      %pad_0 = transform.structured.match ops{["tensor.pad"]}
          filter_result_type = tensor<8x8xf32> in %def {tilefuse.param = "r_pad_type_0"}
        : (!transform.any_op) -> !transform.any_op
      %pad_1 = transform.structured.match ops{["tensor.pad"]}
          filter_result_type = tensor<8xf32> in %def {tilefuse.param = "r_pad_type_1"}
        : (!transform.any_op) -> !transform.any_op
      %pad_2 = transform.structured.match ops{["tensor.pad"]}
          filter_result_type = tensor<1x8x8xf32> in %def {tilefuse.param = "r_pad_type_2"}
        : (!transform.any_op) -> !transform.any_op
      %pad_3 = transform.structured.match ops{["tensor.pad"]}
          filter_result_type = tensor<1x8xf32> in %def {tilefuse.param = "r_pad_type_3"}
        : (!transform.any_op) -> !transform.any_op
      transform.structured.vectorize %pad_0 vector_sizes [8, 8] {tilefuse.param = "r_pad_vector_0"}
        : !transform.any_op
      transform.structured.vectorize %pad_1 vector_sizes [8] {tilefuse.param = "r_pad_vector_1"}
        : !transform.any_op
      transform.structured.vectorize %pad_2 vector_sizes [1, 8, 8] {tilefuse.param = "r_pad_vector_2"}
        : !transform.any_op
      transform.structured.vectorize %pad_3 vector_sizes [1, 8] {tilefuse.param = "r_pad_vector_3"}
        : !transform.any_op
    }
    transform.structured.vectorize %p_root : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.pad_vectorization
    } : !transform.any_op

    // R8. Vectorize the rest (the contraction's row pieces, the fill), as
    // the exact kernel does; the accumulators become loop-carried vectors.
    %vfunc = transform.structured.vectorize_children_and_apply_patterns %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op
    %k_loop_again = transform.structured.match attributes {"tilefuse.k_loop"} in %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %k_loop_again : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // R9. Contractions to FMAs, then the whole-tile vectors of the root cut
    // into row pieces, which then read the accumulators' registers. The
    // masked transfers are unwrapped first (the unroll patterns on a
    // vector.mask region ran out of memory) and not cut (they are unrolled
    // to rows in R10); their masks are lowered after the cut, in a set of
    // their own (docs/findings.md, 'Multi-dim vector masks').
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.lower_masked_transfers
    } : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    // (Canonicalization in a set of its own: it turns a row slice of a
    // t x v vector into vector.extract, which the unroll patterns do not
    // follow, and a 4 x 4 tile was left whole, then copied.)
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.gpu.unroll_vectors_subgroup_mma [1, 4, 1] {tilefuse.param = "r_unroll"}
    } : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    // The cut once more: an unmasked 1-D read of a whole tile (a bias along
    // N that needs no pad) is read t wide and only sliced into row pieces
    // after canonicalization has moved the slices of its broadcast onto it;
    // now those slices let the unroll cut the read itself into v-wide reads.
    // (A bf16 read 8 wide is loaded by IREE's SPIR-V lowering as
    // vector<4xf32> and bitcast in halves to vector<4xbf16>, a
    // vector.bitcast that its bf16 emulation leaves and SPIR-V cannot
    // legalize; 4 wide it is loaded as bf16 and emulated. Masked reads are
    // not cut: the unroll patterns skip them.)
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.gpu.unroll_vectors_subgroup_mma [1, 4, 1] {tilefuse.param = "r_unroll"}
    } : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.lower_masks
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // R10. Bufferize, map, then the 2-D transfers in rows: a masked read
    // gets each row's 1-D mask; the store a guard per row (an scf.if on
    // memrefs, which yields nothing) and a column mask.
    transform.iree.eliminate_empty_tensors %vfunc : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [8, 8, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_masked_transfers
    } : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.vector.materialize_masks
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // R11. Finished: no further pipeline; print it (kernel/verify.py).
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 8, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %bufferized "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.print %bufferized : !transform.any_op
    transform.yield
  }

  // Step "r_tile" of the ragged kernel, with an epilogue: the root tiled to
  // workgroups, the contraction, its fill and the loads fused in.
  transform.named_sequence @tilefuse_matmul_ragged_tile_epilogue(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    %fill = transform.get_producer_of_operand %matmul[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [64, 64] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_matmul, %grid_1 = transform.structured.fuse_into_containing_op %matmul into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_2 = transform.structured.fuse_into_containing_op %fill into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_loads, %grid_3 = transform.structured.fuse_into_containing_op %loads into %grid_2
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_3
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %wg_root, %wg_matmul, %wg_fill : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "r_tile", a bare contraction: the contraction tiled to
  // workgroups, the fill and the loads fused in, and its store into the
  // output made a linalg.copy, which becomes the root (so that, like an
  // epilogue, it is padded and its write folds into the output's).
  transform.named_sequence @tilefuse_matmul_ragged_tile_bare(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %fill = transform.get_producer_of_operand %root[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %root
        tile_sizes [64, 64] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_1 = transform.structured.fuse_into_containing_op %fill into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_loads, %grid_2 = transform.structured.fuse_into_containing_op %loads into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_2
      : (!transform.any_op) -> ()
    %insert = transform.structured.match ops{["tensor.parallel_insert_slice"]} in %grid_2
      : (!transform.any_op) -> !transform.any_op
    %copy = transform.structured.insert_slice_to_copy %insert : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %copy, %wg_matmul, %wg_fill : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "r_k_rows" of the ragged kernel with an M loop: the K step in row
  // pieces, A's pad fused per row, B's per piece, then unrolled.
  transform.named_sequence @tilefuse_matmul_ragged_k_rows(%k_matmul: !transform.any_op {transform.consumed}) {
    %row, %m_loop, %n_loop = transform.structured.tile_using_for %k_matmul tile_sizes [1, 4, 0]
        {tilefuse.param = "k_rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %m_loop_1 = transform.include @tilefuse_matmul_fuse_a_source failures(propagate) (%row, %m_loop)
        {tilefuse.step = "a_rows"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %n_loop_1 = transform.include @tilefuse_matmul_fuse_b_source failures(propagate) (%row, %n_loop)
        {tilefuse.step = "b_rows"} : (!transform.any_op, !transform.any_op) -> !transform.any_op
    %row_guards = transform.structured.match ops{["scf.if"]} in %m_loop_1
      : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %row_guards take_else_branch : (!transform.any_op) -> ()
    %m_outer = transform.get_parent_op %n_loop_1 <{op_name = "scf.for"}>
      : (!transform.any_op) -> !transform.any_op
    transform.loop.unroll %n_loop_1 factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.loop.unroll %m_outer factor = 4 {tilefuse.param = "m_unroll"} : !transform.any_op
    transform.yield
  }

  // Steps "a_rows" and "b_rows" (and "a_prologue", "b_prologue"): the
  // source of the slice an op reads as its A (B) operand fused into a loop
  // around the op, or (@tilefuse_matmul_no_source) nothing. In the ragged
  // kernel the source is the operand's pad of one K step, fused into the
  // loop over row pieces (A's: over rows; B's: over pieces of N). In either
  // kernel it may be the operand's prologue (an elementwise op computing it
  // from loads: a dequantization), fused at every level the contraction is:
  // workgroup, thread, K step, row piece; each level computes only the
  // slice its contraction reads.
  transform.named_sequence @tilefuse_matmul_fuse_a_source(
      %row: !transform.any_op {transform.readonly}, %loop: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    %slice = transform.get_producer_of_operand %row[0] : (!transform.any_op) -> !transform.any_op
    %pad = transform.get_producer_of_operand %slice[0] : (!transform.any_op) -> !transform.any_op
    %fused, %new_loop = transform.structured.fuse_into_containing_op %pad into %loop
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield %new_loop : !transform.any_op
  }

  transform.named_sequence @tilefuse_matmul_fuse_b_source(
      %row: !transform.any_op {transform.readonly}, %loop: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    %slice = transform.get_producer_of_operand %row[1] : (!transform.any_op) -> !transform.any_op
    %pad = transform.get_producer_of_operand %slice[0] : (!transform.any_op) -> !transform.any_op
    %fused, %new_loop = transform.structured.fuse_into_containing_op %pad into %loop
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield %new_loop : !transform.any_op
  }

  transform.named_sequence @tilefuse_matmul_no_source(
      %row: !transform.any_op {transform.readonly}, %loop: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    transform.yield %loop : !transform.any_op
  }

  // Steps "a_pads" and "b_pads": each row piece's pad of A (of B) as a
  // masked read of vector_sizes (one row of A; a K step x v piece of B).
  // Only the pads: a piece that lies whole inside a static tile reads its
  // slice, its pad folded away (42x48x135: 7 of a thread's 8 rows).
  transform.named_sequence @tilefuse_matmul_a_pads(%rows: !transform.any_op {transform.readonly}) {
    %each = transform.get_producer_of_operand %rows[0] : (!transform.any_op) -> !transform.any_op
    %producers = transform.merge_handles deduplicate %each : !transform.any_op
    %pads = transform.foreach %producers : !transform.any_op -> !transform.any_op {
    ^bb0(%producer: !transform.any_op):
      %pad = transform.structured.match ops{["tensor.pad"]} in %producer
        : (!transform.any_op) -> !transform.any_op
      transform.yield %pad : !transform.any_op
    }
    transform.structured.vectorize %pads vector_sizes [1, 4] {tilefuse.param = "a_pad_vector"}
      : !transform.any_op
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_b_pads(%rows: !transform.any_op {transform.readonly}) {
    %each = transform.get_producer_of_operand %rows[1] : (!transform.any_op) -> !transform.any_op
    %producers = transform.merge_handles deduplicate %each : !transform.any_op
    %pads = transform.foreach %producers : !transform.any_op -> !transform.any_op {
    ^bb0(%producer: !transform.any_op):
      %pad = transform.structured.match ops{["tensor.pad"]} in %producer
        : (!transform.any_op) -> !transform.any_op
      transform.yield %pad : !transform.any_op
    }
    transform.structured.vectorize %pads vector_sizes [4, 4] {tilefuse.param = "b_pad_vector"}
      : !transform.any_op
    transform.yield
  }
}
