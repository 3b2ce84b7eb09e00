// Library mode: the matchers a plain `iree-compile` uses to pick tilefuse
// strategies, with no Python step (see `tilefuse flags`).
//
// The driver (`tilefuse compile`) does not use these: it reads each dispatch,
// computes shape-specialized parameters and writes an exact dispatch table.
// Here the matcher sees only the op, so `tilefuse flags` clones this pair once
// per (rank, number of inputs) and specializes the loop strategy for that rank
// with target defaults (masked vectors: correct for any size).
module attributes {transform.with_named_sequence} {
  // Matcher: an all-parallel linalg.generic of a given rank and input count.
  transform.named_sequence @tilefuse_match_loop(%op: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    transform.match.operation_name %op ["linalg.generic"] : !transform.any_op
    %matched = transform.match.structured failures(propagate) %op
        : (!transform.any_op) -> !transform.any_op {
    ^bb0(%generic: !transform.any_op):
      %rank = transform.match.structured.rank %generic
        : (!transform.any_op) -> !transform.param<i64>
      %want_rank = transform.param.constant 2 : i64 {tilefuse.param = "rank"}
        -> !transform.param<i64>
      transform.match.param.cmpi eq %rank, %want_rank : !transform.param<i64>
      %inputs = transform.match.structured.num_inputs %generic
        : (!transform.any_op) -> !transform.param<i64>
      %want_inputs = transform.param.constant 1 : i64 {tilefuse.param = "num_inputs"}
        -> !transform.param<i64>
      transform.match.param.cmpi eq %inputs, %want_inputs : !transform.param<i64>
      // Every loop parallel (the generic form: the custom one no longer parses).
      "transform.match.structured.dim"(%generic) <{raw_dim_list = array<i64>, is_all, parallel}>
        : (!transform.any_op) -> ()
      transform.match.structured.yield %generic : !transform.any_op
    }
    transform.yield %matched : !transform.any_op
  }

  // Action: send the dispatch function down the matching loop strategy.
  transform.named_sequence @tilefuse_use_loop(%op: !transform.any_op {transform.readonly}) {
    %func = transform.get_parent_op %op <{op_name = "func.func"}>
      : (!transform.any_op) -> !transform.any_op
    %strategy = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.transform_dialect_codegen codegen_spec = @tilefuse_loop>
        {tilefuse.param = "codegen_spec"} -> !transform.any_param
    transform.annotate %func "translation_info" = %strategy
      : !transform.any_op, !transform.any_param
    transform.yield
  }

  transform.named_sequence @kernel_config(%variant: !transform.any_op {transform.consumed}) {
    transform.foreach_match in %variant
        @tilefuse_match_loop -> @tilefuse_use_loop
      {tilefuse.param = "table"} : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
