"""A library function that reads a tensor's value on the host, as transformers' masking_utils does
(padding_mask.all() to choose SDPA's is_causal): on XLA the read runs the graph so far, inside the
library, where the user can neither edit the line nor put a step closure around it."""


def mask_has_no_padding(mask) -> bool:
    return bool(mask.all())  # the value read
