// Where does one SM's data live in the H200's L2? (docs/results/h200.md, "Two SMs".)
// Step 1: for every SM, the near/far pattern of 256 chunks of 256 B (a fine .cg chase over
// a resident 64 KiB array): SMs with the same pattern are on the same side of the L2.
// Step 2: SM A chases array P and SM B chases array Q at the same time (cyclic, 64-byte
// nodes, 3 warm passes, then a timed pass); mean cycles per load for A alone, A with B on
// the same side, A with B on the other side, for several sizes of each array.
//   nvcc -O2 -arch=sm_90 -o l2_two_sm scripts/gpu/l2_two_sm.cu && ./l2_two_sm
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// One block per SM acts (the first to claim it); the block on `sm` times 256 loads of a
// chain of 256-byte nodes after a warm pass, and writes them to out[sm * 256 ...].
__global__ void pattern(const uint32_t* chain, uint32_t nodes, int* claimed, uint32_t* out) {
  __shared__ volatile uint32_t sink;
  uint32_t s = smid();
  if (atomicCAS(&claimed[s], 0, 1) != 0) return;
  uint32_t j = 0;
  for (uint32_t i = 0; i < nodes; ++i) j = ld_cg(chain + j);
  for (uint32_t t = 0; t < 256; ++t) {
    uint32_t t0, t1;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t0) :: "memory");
    j = ld_cg(chain + j);
    sink = j;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t1) :: "memory");
    out[s * 256 + t] = t1 - t0;
  }
}

// The block on smA chases p, the block on smB (if smB >= 0) chases q, concurrently.
__global__ void dual(const uint32_t* p, uint64_t np, const uint32_t* q, uint64_t nq, int smA,
                     int smB, int* claimed, int* arrived, unsigned long long* out) {
  uint32_t s = smid();
  bool a = (int)s == smA, b = (int)s == smB;
  if (!a && !b) return;
  if (atomicCAS(&claimed[s], 0, 1) != 0) return;
  const uint32_t* c = a ? p : q;
  uint64_t n = a ? np : nq;
  // Wait until both participants are running, so that their passes overlap.
  atomicAdd(arrived, 1);
  int want = smB >= 0 ? 2 : 1;
  while (atomicAdd(arrived, 0) < want) {}
  uint32_t j = 0;
  for (uint64_t i = 0; i < 3 * n; ++i) j = ld_cg(c + j);
  long long t0 = clock64();
  for (uint64_t i = 0; i < n; ++i) j = ld_cg(c + j);
  long long t1 = clock64();
  out[a ? 0 : 1] = (unsigned long long)(t1 - t0) + (j == 0xffffffffu);
}

static void make_chain(std::vector<uint32_t>& h, size_t bytes, size_t stride) {
  size_t n = bytes / stride, e = stride / 4;
  h.assign(bytes / 4, 0);
  for (size_t i = 0; i < n; ++i) h[i * e] = (uint32_t)(((i + 1) % n) * e);
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint32_t *pa, *qa, *lat;
  int *claimed, *arrived;
  unsigned long long* out;
  size_t max_bytes = 48ull << 20;
  CHECK(cudaMalloc(&pa, max_bytes));
  CHECK(cudaMalloc(&qa, max_bytes));
  CHECK(cudaMalloc(&lat, 256 * 4 * 256));
  CHECK(cudaMalloc(&claimed, 256 * sizeof(int)));
  CHECK(cudaMalloc(&arrived, sizeof(int)));
  CHECK(cudaMalloc(&out, 2 * sizeof(unsigned long long)));
  std::vector<uint32_t> h;
  // Step 1: sides.
  make_chain(h, 64 * 1024, 256);
  CHECK(cudaMemcpy(pa, h.data(), 64 * 1024, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(claimed, 0, 256 * sizeof(int)));
  pattern<<<4 * sms, 32>>>(pa, 256, claimed, lat);
  CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> hl(256 * 256);
  CHECK(cudaMemcpy(hl.data(), lat, hl.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<std::vector<int>> fast(sms);
  for (int s = 0; s < sms; ++s) {
    uint32_t lo = 0xffffffffu;
    for (int t = 0; t < 256; ++t) lo = hl[s * 256 + t] < lo ? hl[s * 256 + t] : lo;
    for (int t = 0; t < 256; ++t) fast[s].push_back(hl[s * 256 + t] < lo + 16);
  }
  // Agreement of each SM's near-chunk pattern with SM 0's, and the distinct patterns.
  std::vector<int> agree(sms, 0);
  std::vector<std::vector<int>> patterns;
  std::vector<int> members;
  for (int s = 0; s < sms; ++s) {
    for (int t = 0; t < 256; ++t) agree[s] += fast[s][t] == fast[0][t];
    bool found = false;
    for (size_t k = 0; k < patterns.size(); ++k) {
      int d = 0;
      for (int t = 0; t < 256; ++t) d += patterns[k][t] != fast[s][t];
      if (d <= 8) { members[k]++; found = true; break; }
    }
    if (!found) { patterns.push_back(fast[s]); members.push_back(1); }
  }
  printf("step 1: %d SMs, %zu distinct near-chunk patterns (<= 8 of 256 chunks apart), members:", sms, patterns.size());
  for (int m : members) printf(" %d", m);
  printf("\nfast chunks per pattern:");
  for (auto& pt : patterns) { int f = 0; for (int v : pt) f += v; printf(" %d", f); }
  printf("\nagreement with SM 0 (of 256 chunks), by SM:");
  for (int s = 0; s < sms; ++s) printf("%s%d", s % 22 == 0 ? "\n  " : " ", agree[s]);
  printf("\n");
  int same = -1, other = 1;
  for (int s = 1; s < sms; ++s) {
    if (agree[s] >= 248 && same < 0 && s > sms / 2) same = s;
    if (agree[s] < agree[other]) other = s;
  }
  if (same < 0) for (int s = 1; s < sms; ++s) if (agree[s] >= 248) { same = s; break; }
  printf("SM A = 0, same pattern B = %d, least agreeing B = %d (%d of 256 chunks agree)\n", same, other, agree[other]);
  // Step 2.
  printf("step 2: mean cycles per load of A's timed pass (and B's), 64-byte nodes\n");
  const int sizes[] = {8, 12, 14, 16, 20, 24, 28};
  for (int mib : sizes) {
    size_t bytes = (size_t)mib << 20;
    make_chain(h, bytes, 64);
    CHECK(cudaMemcpy(pa, h.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(qa, h.data(), bytes, cudaMemcpyHostToDevice));
    uint64_t n = bytes / 64;
    printf("each %2d MiB:", mib);
    for (int b : {-1, same, other}) {
      CHECK(cudaMemset(claimed, 0, 256 * sizeof(int)));
      CHECK(cudaMemset(arrived, 0, sizeof(int)));
      CHECK(cudaMemset(out, 0, 2 * sizeof(unsigned long long)));
      dual<<<4 * sms, 32>>>(pa, n, qa, n, 0, b, claimed, arrived, out);
      CHECK(cudaDeviceSynchronize());
      unsigned long long ho[2];
      CHECK(cudaMemcpy(ho, out, sizeof(ho), cudaMemcpyDeviceToHost));
      const char* what = b < 0 ? "alone" : b == same ? "same pattern" : "least agreeing";
      if (b < 0) printf("  A %s %6.1f", what, ho[0] / (double)n);
      else printf("  | %s: A %6.1f B %6.1f", what, ho[0] / (double)n, ho[1] / (double)n);
    }
    printf("\n");
  }
  return 0;
}
