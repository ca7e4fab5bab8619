# The compute order of DeepSeek's DualPipe.step (dualpipe/dualpipe.py at
# 3da1bbe), with every communication call dropped: a transcription of its
# control flow that records which chunk each compute call runs.
import sys

def order(num_ranks, num_chunks, rank):
    out = []
    half_rank = min(rank, num_ranks - 1 - rank)
    num_half_ranks = num_ranks // 2
    half_num_chunks = num_chunks // 2
    second = rank >= num_ranks // 2
    is_middle = rank in (num_ranks // 2 - 1, num_ranks // 2)
    f_id = [0, 0]; b_id = [0, 0]
    wq = []
    def stage(phys):
        # module[0] on rank r: stage r of direction 0; module[1]: direction 1,
        # entering at rank p-1, its stage k on rank p-1-k: ppsim stage p+k.
        return rank if phys == 0 else num_ranks + (num_ranks - 1 - rank)
    def mb(phys, k):
        return k + (half_num_chunks if phys == 1 else 0)
    def F(phase):
        phys = phase ^ second
        k = f_id[phys]; f_id[phys] += 1
        return f"{stage(phys)}F{mb(phys, k)}"
    def B(phase, zb=False):
        phys = phase ^ second
        k = b_id[phys]; b_id[phys] += 1
        if zb:
            wq.append(f"{stage(phys)}W{mb(phys, k)}")
            return f"{stage(phys)}I{mb(phys, k)}"
        return f"{stage(phys)}B{mb(phys, k)}"
    def FB(p0, p1):
        f = F(p0); b = B(p1)
        return f"({f};{b})"
    def W():
        return wq.pop(0)
    for i in range((num_half_ranks - half_rank - 1) * 2): out.append(F(0))
    for i in range(half_rank + 1):
        out.append(F(0)); out.append(F(1))
    for i in range(num_half_ranks - half_rank - 1):
        out.append(B(1, True)); out.append(W()); out.append(F(1))
    for i in range(half_num_chunks - num_ranks + half_rank + 1):
        if i == 0 and is_middle:
            out.append(F(0)); out.append(B(1))
        else:
            out.append(FB(0, 1))
        out.append(FB(1, 0))
    for i in range(num_half_ranks - half_rank - 1):
        out.append(B(1)); out.append(FB(1, 0))
    step_6 = half_rank + 1
    zb = False
    for i in range(step_6):
        if i == step_6 // 2 and half_rank % 2 == 1: zb = True
        out.append(B(1, zb))
        if i == step_6 // 2 and half_rank % 2 == 0: zb = True
        out.append(B(0, zb))
    for i in range(num_half_ranks - half_rank - 1):
        out.append(W()); out.append(B(0, True))
    for i in range(half_rank + 1): out.append(W())
    assert not wq
    return out

p, m = int(sys.argv[1]), int(sys.argv[2])
for r in range(p):
    print(" ".join(order(p, m, r)))
