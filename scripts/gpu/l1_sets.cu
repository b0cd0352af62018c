// Probes: the sets, ways and replacement of the L1 data cache by the members of one set, not
// by a stride (the H100's and H200's set index is hashed, so no stride puts W + 1 lines into
// one set):
//   1. capacity: the smallest n such that a cyclic chase over lines 0..n-1 (128 B apart,
//      ld.global.ca, one thread) has a line that misses repeatedly; line n-1 then belongs
//      to the one overflowing set;
//   2. members: every line x whose removal from those n lines ends the repeated misses is
//      in that set; ways = members - 1, checked by chasing the members alone (all miss)
//      and all but one (none miss);
//   3. more members: lines y beyond n for which the set's first W members plus y miss;
//   4. replacement: with 2W members known, sequences "reset (W other members, twice),
//      fill A0..A(W-1), touch A_r, load B" then probe one A_j: the one that misses is the
//      victim; each (r, j) three times, so that a random policy shows as disagreement.
// Every chase is timed over 16 passes, a line conflicting when slow in at least 4 of them.
// argv[1] = U: the unit added, removed and tested is a block of U consecutive lines (1, 2,
// 4). Every launch uses 30 KiB of static shared memory at carveout 0 (as memtopo's `sets`
// does), so the driver runs it with the 32 KiB shared-memory configuration and the L1 keeps
// one size. argv[2] = "shift": the first overflowing chase again at offsets of 2 and 4 MiB
// (other pages). argv[2] = "phys": the first overflowing chase in one physical chunk mapped
// at two virtual addresses, and in another chunk at the same two. argv[2] = "reduce": step 2
// as a greedy reduction to a smallest overflowing set, and the miss share of chases over
// fewer and more of its lines; argv[3]: KiB of dynamic shared memory per chase (another
// shared-memory configuration, a smaller L1).
// Backs: docs/results/h100-deep.md and h200-deep.md, L1 sets (`1 reduce`: 434 ways at
// 217 KiB, 298 at 149 KiB, docs/evidence/2026-11-26-h100-h200-l1-sets/; `1 phys`: the set
// follows the virtual address, docs/evidence/2026-11-26-h100-h200-l1-virtual-index/).
// Build: nvcc -O2 -arch=sm_90 -o l1_sets l1_sets.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(r_), __LINE__); exit(1); } } while (0)

static const unsigned LINE_WORDS = 32;        // 128 B lines of u32
static const unsigned MAX_LINES = 1 << 16;    // 8 MiB of lines
static const unsigned SLOTS = 3840;           // timed loads per launch (30 KiB with indices)
static const unsigned MISS = 150;             // cycles: L1 hit ~40, L2 hit ~260

__device__ __forceinline__ unsigned ld_ca(const unsigned* p) {
  unsigned v;
  asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned clock_now() {
  unsigned t;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory");
  return t;
}

// next[at[i]] = to[i]
__global__ void scatter(unsigned* buf, const unsigned* at, const unsigned* to, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    buf[at[i] * LINE_WORDS] = to[i];
}

// A cyclic chase from `start`: `warm` untimed loads, then `timed` loads, each timed; a
// load slower than MISS adds one to its line's count in `misses` (a global atomic, outside
// the timed interval, which the L1 does not cache). 30 KiB of static shared memory keep
// the launch in the 32 KiB configuration like every other launch here. (The first version
// recorded at most 3840 loads in shared memory, about two passes of a full chase: too few
// to tell a conflict from noise; its capacities and members were not reliable.)
__global__ void chase(const unsigned* buf, unsigned start, unsigned warm, unsigned timed, unsigned* misses) {
  __shared__ unsigned pad[2 * SLOTS];
  __shared__ volatile unsigned sink;
  if (threadIdx.x != 0) return;
  unsigned j = start;
  for (unsigned k = 0; k < warm; ++k) j = ld_ca(buf + j * LINE_WORDS);
  for (unsigned k = 0; k < timed; ++k) {
    const unsigned* p = buf + j * LINE_WORDS;
    unsigned t0 = clock_now();
    unsigned nj = ld_ca(p);
    sink = nj;  // consumed before the second clock read
    unsigned t1 = clock_now();
    if (t1 - t0 > MISS) atomicAdd(misses + j, 1u);
    j = nj;
  }
  pad[j % (2 * SLOTS)] = j;
  if (pad[(j + 1) % (2 * SLOTS)] == 0xffffffffu) sink = 0;
}

// A fixed sequence of lines (no chase: each address waits for the previous load's value,
// which is 0 once the buffer is cleared), every load timed.
__global__ void sequence(const unsigned* zero, const unsigned* seq, unsigned n, unsigned* out) {
  __shared__ unsigned lat[SLOTS];
  __shared__ unsigned s[SLOTS];
  __shared__ volatile unsigned sink;
  if (threadIdx.x != 0) return;
  for (unsigned k = 0; k < n; ++k) s[k] = seq[k];
  unsigned v = 0;
  for (unsigned k = 0; k < n; ++k) {
    const unsigned* p = zero + (s[k] + v) * LINE_WORDS;
    unsigned t0 = clock_now();
    v = ld_ca(p);
    sink = v;
    unsigned t1 = clock_now();
    lat[k] = t1 - t0;
  }
  for (unsigned k = 0; k < n; ++k) out[k] = lat[k];
}

static unsigned *d_buf, *d_at, *d_to, *d_out, *d_seq;
static long launches = 0;

// Per line of `lines`, the loads that missed and were timed.
struct Result { std::vector<unsigned> misses, visits; };

static const unsigned PASSES = 16;

// Dynamic shared memory per chase launch (argv[3], KiB): with the 30 KiB static array it
// makes the driver take a larger shared-memory configuration, so the L1 is smaller.
static unsigned DYN = 0;

static Result run(const std::vector<unsigned>& lines) {
  const unsigned n = (unsigned)lines.size();
  std::vector<unsigned> to(n);
  for (unsigned i = 0; i < n; ++i) to[i] = lines[(i + 1) % n];
  RK(cudaMemcpy(d_at, lines.data(), n * 4, cudaMemcpyHostToDevice));
  RK(cudaMemcpy(d_to, to.data(), n * 4, cudaMemcpyHostToDevice));
  scatter<<<16, 256>>>(d_buf, d_at, d_to, n);
  RK(cudaMemset(d_out, 0, MAX_LINES * 4));
  chase<<<1, 32, DYN>>>(d_buf, lines[0], 2 * n, PASSES * n, d_out);
  RK(cudaDeviceSynchronize());
  ++launches;
  std::vector<unsigned> counts(MAX_LINES);
  RK(cudaMemcpy(counts.data(), d_out, MAX_LINES * 4, cudaMemcpyDeviceToHost));
  Result r{std::vector<unsigned>(n, 0), std::vector<unsigned>(n, PASSES)};
  for (unsigned i = 0; i < n; ++i) r.misses[i] = counts[lines[i]];
  return r;
}

// Lines that miss in at least a quarter of their 16 timed passes (a rare slow load is not
// a conflict; a 16-way random set misses about one pass in eight, still 2 of 16).
static std::vector<unsigned> repeated(const std::vector<unsigned>& lines, const Result& r) {
  std::vector<unsigned> v;
  for (size_t i = 0; i < lines.size(); ++i)
    if (r.misses[i] >= 4 && 4 * r.misses[i] >= r.visits[i]) v.push_back(lines[i]);
  return v;
}
static bool overflows(const std::vector<unsigned>& lines) { return !repeated(lines, run(lines)).empty(); }

// Blocks of U consecutive lines (argv[1], default 1): the unit that is added, removed and
// tested. The lines of `blocks`, in order.
static unsigned U = 1;
static std::vector<unsigned> lines_of(const std::vector<unsigned>& blocks) {
  std::vector<unsigned> v;
  for (unsigned b : blocks)
    for (unsigned k = 0; k < U; ++k) v.push_back(b * U + k);
  return v;
}
static std::vector<unsigned> first(unsigned n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; ++i) v[i] = i;
  return v;
}
static bool overflows_blocks(const std::vector<unsigned>& blocks) { return overflows(lines_of(blocks)); }

int main(int argc, char** argv) {
  if (argc > 1) U = (unsigned)atoi(argv[1]);
  if (U < 1 || U > 8) U = 1;
  RK(cudaSetDevice(0));
  cudaDeviceProp prop;
  RK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, shared per SM %zu B; unit %u line(s) of 128 B\n", prop.name, prop.multiProcessorCount,
         prop.sharedMemPerMultiprocessor, U);
  RK(cudaMalloc(&d_buf, (size_t)MAX_LINES * LINE_WORDS * 4));
  RK(cudaMalloc(&d_at, MAX_LINES * 4));
  RK(cudaMalloc(&d_to, MAX_LINES * 4));
  RK(cudaMalloc(&d_out, MAX_LINES * 4));
  RK(cudaMalloc(&d_seq, SLOTS * 4));
  // Carveout 0 (prefer the L1): with 30 KiB of static shared memory the driver then takes
  // the 32 KiB configuration. Without it, it took one that left about 28 KiB of L1 (every
  // line of a 1024-line chase missed on GPU-5bb49fb9).
  RK(cudaFuncSetAttribute(chase, cudaFuncAttributePreferredSharedMemoryCarveout, 0));
  if (argc > 3) DYN = (unsigned)atoi(argv[3]) * 1024;
  if (DYN) RK(cudaFuncSetAttribute(chase, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)DYN));
  printf("dynamic shared memory per chase: %u B\n", DYN);
  RK(cudaFuncSetAttribute(sequence, cudaFuncAttributePreferredSharedMemoryCarveout, 0));
  cudaFuncAttributes fa;
  RK(cudaFuncGetAttributes(&fa, chase));
  printf("chase kernel: %zu B static shared\n", fa.sharedSizeBytes);

  // With "phys": the chase runs in one physical 2 MiB chunk mapped through the VMM API at a
  // virtual address A; once its first overflow is found, the same chase runs with that chunk
  // at another address B, with a second chunk at A and at B, and with the first at A again:
  // whether the lines that conflict follow the physical or the virtual page.
  const bool phys = argc > 2 && std::string(argv[2]) == "phys";
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle chunk[2] = {0, 0};
  CUmemAccessDesc access = {};
  const size_t page = 2u << 20;
  if (phys) {
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    CUmemAllocationProp mp = {};
    mp.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    mp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    mp.location.id = dev;
    for (auto& c : chunk) CK(cuMemCreate(&c, page, &mp, 0));
    CK(cuMemAddressReserve(&va, 64 * page, page, 0, 0));
    access.location = mp.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemMap(va, page, 0, chunk[0], 0));
    CK(cuMemSetAccess(va, page, &access, 1));
    d_buf = (unsigned*)va;
    printf("phys: chunk 0 at 0x%llx\n", (unsigned long long)va);
  }

  // 1. Capacity, in blocks: up by 64 lines' worth from there, then bisect.
  const unsigned step = 64 / U;
  unsigned lo = 0, hi = 0;
  for (unsigned n = step; n * U <= 4096; n += step) {
    if (overflows_blocks(first(n))) { hi = n; break; }
    lo = n;
  }
  if (!hi) { printf("no overflow up to 4096 lines\n"); return 0; }
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (overflows_blocks(first(mid))) hi = mid; else lo = mid;
  }
  const unsigned n = hi;
  std::vector<unsigned> base = first(n);
  std::vector<unsigned> base_lines = lines_of(base);
  Result rb = run(base_lines);
  std::vector<unsigned> missers = repeated(base_lines, rb);
  printf("capacity: %u blocks fit (%.2f KiB), %u overflow; lines missing repeatedly at %u:", n - 1, (n - 1) * U * 0.125, n,
         n);
  for (size_t i = 0; i < missers.size() && i < 40; ++i) printf(" %u", missers[i]);
  printf("%s\n", missers.size() > 40 ? " ..." : "");
  if (phys) {
    CUdeviceptr mapped = va;
    const unsigned long long b_off = 37ull * page;  // another 2 MiB page, 74 MiB further on
    const struct { int c; unsigned long long off; const char* name; } steps[] = {
        {0, b_off, "chunk 0 at B"}, {1, 0, "chunk 1 at A"}, {1, b_off, "chunk 1 at B"}, {0, 0, "chunk 0 at A again"}};
    for (const auto& st : steps) {
      CK(cuMemUnmap(mapped, page));
      mapped = va + st.off;
      CK(cuMemMap(mapped, page, 0, chunk[st.c], 0));
      CK(cuMemSetAccess(mapped, page, &access, 1));
      d_buf = (unsigned*)mapped;
      for (int rep = 0; rep < 2; ++rep) {
        std::vector<unsigned> m = repeated(base_lines, run(base_lines));
        std::vector<unsigned> below(base_lines.begin(), base_lines.end() - U);
        printf("%-20s: %zu lines miss at %u (%s below):", st.name, m.size(), n, overflows(below) ? "some" : "none");
        for (size_t i = 0; i < m.size() && i < 24; ++i) printf(" %u", m[i]);
        printf("\n");
      }
    }
    printf("%ld launches\n", launches);
    return 0;
  }
  const bool reduce = argc > 2 && std::string(argv[2]) == "reduce";
  if (lo == 0 || (missers.size() > 64 && !reduce)) { printf("no single set overflows first: stop\n"); return 0; }

  // With "shift": the same chase at other offsets in the buffer (2 and 4 MiB on, i.e. in
  // other 2 MiB pages, then back at 0), twice each: whether the lines that overflow first
  // follow the offset within a page (a fixed index of the low address bits) or the page.
  if (argc > 2 && std::string(argv[2]) == "shift") {
    for (unsigned off : {0u, 16384u, 32768u, 0u, 16384u}) {
      for (int rep = 0; rep < 2; ++rep) {
        std::vector<unsigned> at;
        for (unsigned l : base_lines) at.push_back(l + off);
        Result r = run(at);
        std::vector<unsigned> m = repeated(at, r);
        std::vector<unsigned> below(at.begin(), at.end() - U);
        bool fits = !overflows(below);
        printf("offset %u lines (%u KiB): %zu lines miss at %u blocks (%s below):", off, off / 8, m.size(), n,
               fits ? "none" : "some");
        for (size_t i = 0; i < m.size() && i < 24; ++i) printf(" %u", m[i] - off);
        printf("\n");
      }
    }
    printf("%ld launches\n", launches);
    return 0;
  }

  // 2. Members: blocks whose removal ends the repeated misses (checked twice). With
  // "reduce" instead a greedy reduction: every block whose absence keeps the
  // repeated misses is dropped, in address order, so that what is left is a smallest set
  // of lines that still overflows (for an LRU set, its W + 1 lines); then each remaining
  // block is checked once more to be needed. (Single removals from all n blocks name hundreds
  // of lines on the H100, no one set.)
  std::vector<unsigned> members;
  if (reduce) {
    // From 32 blocks past the first overflow, so that the group that overflows misses
    // clearly; "still overflows" is at least 48 misses in the 16 timed passes (3 a pass),
    // a count that lines of other groups, whose removal changes nothing, leave as it is.
    // (The first version asked for a line missing in a quarter of its passes, as step 1
    // does: near the edge a random victim choice makes that a coin toss, and one of three
    // runs kept 1737 of 1749 blocks.)
    auto busy = [](const std::vector<unsigned>& blocks) {
      Result r = run(lines_of(blocks));
      unsigned a = 0;
      for (unsigned v : r.misses) a += v;
      return a >= 48;
    };
    std::vector<unsigned> m = first(n + 32);
    for (size_t i = 0; i < m.size() && launches < 20000;) {
      std::vector<unsigned> without(m);
      without.erase(without.begin() + (long)i);
      if (busy(without)) m = without; else ++i;
    }
    unsigned needed = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      std::vector<unsigned> without(m);
      without.erase(without.begin() + (long)i);
      if (!busy(without)) ++needed;
    }
    Result rm = run(lines_of(m));
    unsigned miss = 0, vis = 0;
    for (size_t i = 0; i < rm.misses.size(); ++i) { miss += rm.misses[i]; vis += rm.visits[i]; }
    printf("reduced: %zu of %u blocks still miss 48 times or more (their loads miss %u of %u); %u of them needed on a second look\n",
           m.size(), n + 32, miss, vis, needed);
    members = m;
    // The miss share of a cyclic chase over the first k members, and over all of them plus
    // further lines of the same group (lines y past n with which the first |m| - 1 members
    // overflow): 0 up to the ways and 1 beyond them for LRU or FIFO, a gradual rise for a
    // random choice of victim.
    std::vector<unsigned> extra;
    std::vector<unsigned> head(m.begin(), m.end() - 1);
    for (unsigned y = n + 32; y < n + 544 && extra.size() < 8 && launches < 20000; ++y) {
      std::vector<unsigned> probe(head);
      probe.push_back(y);
      if (busy(probe) && busy(probe)) extra.push_back(y);
    }
    printf("curve (blocks: share of loads missed, two runs):");
    const int M = (int)m.size();
    for (int k : {M - 64, M - 32, M - 16, M - 8, M - 4, M - 2, M - 1, M}) {
      if (k < 2) continue;
      std::vector<unsigned> part(m.begin(), m.begin() + k);
      printf(" %d:", k);
      for (int rep = 0; rep < 2; ++rep) {
        Result r = run(lines_of(part));
        unsigned a = 0, b = 0;
        for (size_t i = 0; i < r.misses.size(); ++i) { a += r.misses[i]; b += r.visits[i]; }
        printf("%s%.3f", rep ? "/" : "", b ? (double)a / b : 0.0);
      }
    }
    for (size_t e = 1; e <= extra.size(); e *= 2) {
      std::vector<unsigned> more_lines(m);
      more_lines.insert(more_lines.end(), extra.begin(), extra.begin() + (long)e);
      printf(" %zu:", more_lines.size());
      for (int rep = 0; rep < 2; ++rep) {
        Result r = run(lines_of(more_lines));
        unsigned a = 0, b = 0;
        for (size_t i = 0; i < r.misses.size(); ++i) { a += r.misses[i]; b += r.visits[i]; }
        printf("%s%.3f", rep ? "/" : "", b ? (double)a / b : 0.0);
      }
    }
    printf("\nextra members past %u: %zu\n", n + 32, extra.size());
  } else {
    for (unsigned x = 0; x < n; ++x) {
      std::vector<unsigned> without;
      for (unsigned y : base) if (y != x) without.push_back(y);
      if (!overflows_blocks(without) && !overflows_blocks(without)) members.push_back(x);
    }
  }
  printf("member blocks of the overflowing set (%zu):", members.size());
  for (unsigned x : members) printf(" %u(0x%x)", x, x * U * 128);
  printf("\n");
  if (members.size() < 2) { printf("no set found\n"); return 0; }
  const unsigned W = (unsigned)members.size() - 1;
  Result ra = run(lines_of(members));
  std::vector<unsigned> all_but(members.begin(), members.end() - 1);
  Result rw = run(lines_of(all_but));
  unsigned miss_all = 0, miss_w = 0, vis_all = 0, vis_w = 0;
  for (size_t i = 0; i < ra.misses.size(); ++i) { miss_all += ra.misses[i]; vis_all += ra.visits[i]; }
  for (size_t i = 0; i < rw.misses.size(); ++i) { miss_w += rw.misses[i]; vis_w += rw.visits[i]; }
  printf("ways %u: the %u member blocks alone miss %u of %u loads; %u of them miss %u of %u\n", W, W + 1, miss_all,
         vis_all, W, miss_w, vis_w);
  if (2 * miss_all < vis_all || miss_w > vis_w / 50) {
    printf("the members alone do not behave as one set of %u ways: stop\n", W);
    printf("%ld launches\n", launches);
    return 0;
  }

  // 3. More members beyond n: W of the set plus block y overflow.
  std::vector<unsigned> more;
  for (unsigned y = n; (y + 1) * U < MAX_LINES && more.size() < 3 * W + 3; ++y) {
    std::vector<unsigned> probe(members.begin(), members.begin() + W);
    probe.push_back(y);
    if (overflows_blocks(probe) && overflows_blocks(probe)) more.push_back(y);
  }
  printf("more member blocks (%zu):", more.size());
  for (unsigned y : more) printf(" %u(0x%x)", y, y * U * 128);
  printf("\n");
  std::vector<unsigned> set = members;
  set.insert(set.end(), more.begin(), more.end());
  // XOR of all address bits of members: the bits that vary and those that do not.
  unsigned and_all = ~0u, or_all = 0;
  for (unsigned x : set) { and_all &= x * U * 128; or_all |= x * U * 128; }
  printf("byte-address bits always 1: 0x%x, ever 1: 0x%x\n", and_all, or_all);

  // 4. Replacement: reset with W other members, fill A0..A(W-1), touch A_r, load B, probe A_j.
  // The sequences read the same buffer (the same addresses, so the same sets), cleared.
  RK(cudaMemset(d_buf, 0, (size_t)MAX_LINES * LINE_WORDS * 4));
  if (set.size() >= 2 * W + 1) {
    std::vector<unsigned> A, R;
    for (unsigned k = 0; k < W; ++k) { A.push_back(set[k] * U); R.push_back(set[W + k] * U); }
    unsigned B = set[2 * W] * U;
    printf("replacement: A = first %u members, B = member %u, reset = the next %u\n", W, 2 * W, W);
    std::vector<int> rs = {-1};
    for (unsigned r = 0; r < W; ++r) rs.push_back((int)r);
    for (int r : rs) {
      printf("touch %s%d: victims", r < 0 ? "none" : "A", r < 0 ? 0 : r);
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<unsigned> missed;
        for (unsigned j = 0; j < W; ++j) {
          std::vector<unsigned> seq;
          for (int pass = 0; pass < 2; ++pass) seq.insert(seq.end(), R.begin(), R.end());
          seq.insert(seq.end(), A.begin(), A.end());
          if (r >= 0) seq.push_back(A[r]);
          seq.push_back(B);
          seq.push_back(A[j]);
          RK(cudaMemcpy(d_seq, seq.data(), seq.size() * 4, cudaMemcpyHostToDevice));
          sequence<<<1, 32>>>(d_buf, d_seq, (unsigned)seq.size(), d_out);
          RK(cudaDeviceSynchronize());
          ++launches;
          std::vector<unsigned> lat(seq.size());
          RK(cudaMemcpy(lat.data(), d_out, lat.size() * 4, cudaMemcpyDeviceToHost));
          if (lat.back() > MISS) missed.push_back(j);
        }
        printf(" [");
        for (size_t k = 0; k < missed.size(); ++k) printf("%sA%u", k ? " " : "", missed[k]);
        printf("]");
      }
      printf("\n");
    }
  } else {
    printf("replacement: too few members (%zu, need %u)\n", set.size(), 2 * W + 1);
  }
  printf("%ld launches\n", launches);
  return 0;
}
