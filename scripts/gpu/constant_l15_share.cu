// Probe: the constant L1.5's capacity past what one kernel can address. One kernel reaches at
// most its module's 64 KiB `__constant__` bank and 32 KiB of parameters; constant_banks.cu
// found all 95 KiB of both hitting. Here other kernels run beside the chaser on the same SMs
// and keep their own parameters (31 KiB per launch, a bank of their own: each launch's
// parameters are separate memory) in the L1.5: T launches of a thrasher, each with blocks
// on every SM, chase their parameter chains until the chaser is done. If the L1.5 is one
// cache per SM of C bytes, the chaser's 95 KiB start to miss once 95 KiB + the thrashers'
// footprints pass C; if each bank (or kernel) has a cache of its own, they never do.
// A control runs the same thrashers over one line each (contention without footprint).
// A second kind of thrasher reads a `__constant__` bank of its own: a PTX module (below),
// loaded up to six times (each loaded module has its own 64 KiB bank), chasing `kib` KiB of
// it. Every thrasher block counts itself on its SM, and the chaser notes its SM, so that the
// output shows how many blocks of each thrasher shared the chaser's SM.
// Prints `kind,thrashers,thrasher_kib,footprint_kib,p5,p50,p95,share_above_1.5x_p5,started,
// chaser_sm,thrasher_blocks_on_it`.
// Backs: the constant L1.5's bound in docs/results/h100-deep.md and h200-deep.md
// (docs/evidence/2026-11-28-h100-h200-gpc-contention/).
//   nvcc -O2 -arch=sm_90 -o cshare scripts/gpu/constant_l15_share.cu -lcuda && ./cshare
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

constexpr uint32_t BANK_WORDS = 16384;  // 64 KiB
constexpr uint32_t PARAM_WORDS = 7936;  // 31 KiB
constexpr uint32_t NODE_WORDS = 16;     // 64 B
constexpr uint32_t MAX_NODES = (BANK_WORDS + PARAM_WORDS) / NODE_WORDS;

__constant__ uint32_t bank[BANK_WORDS];
struct Params { uint32_t w[PARAM_WORDS]; };

__device__ __forceinline__ uint32_t clk() { uint32_t t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory"); return t; }
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint64_t gtime() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory"); return t; }

// Chases its parameter chain until *stop (or 2 s), after counting itself in *started.
__global__ void thrash(const __grid_constant__ Params p, volatile int* stop, int* started, int* on_sm) {
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0) return;
  atomicAdd(&on_sm[smid()], 1);
  atomicAdd(started, 1);
  const uint64_t give_up = gtime() + 2000000000ull;
  uint32_t j = 0;
  while (!*stop) {
    for (int i = 0; i < 64; ++i) j = p.w[j];
    sink = j;
    if (gtime() > give_up) break;
  }
}

// Waits for `expect` thrasher blocks (or 200 ms), then chases as constant_banks.cu does.
__global__ void chase(const __grid_constant__ Params p, uint32_t start, uint32_t n, int* started, int expect,
                      volatile int* stop, uint32_t* out, int* seen, int* chaser_sm) {
  __shared__ uint32_t lat[MAX_NODES];
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0) return;
  const uint64_t give_up = gtime() + 200000000ull;
  while (*(volatile int*)started < expect && gtime() < give_up) {}
  *seen = *(volatile int*)started;
  *chaser_sm = smid();
  uint32_t j = start;
  for (int pass = 0; pass < 3; ++pass)
    for (uint32_t i = 0; i < n; ++i) j = j < BANK_WORDS ? bank[j] : p.w[j - BANK_WORDS];
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t t0 = clk();
    j = j < BANK_WORDS ? bank[j] : p.w[j - BANK_WORDS];
    sink = j;
    uint32_t t1 = clk();
    lat[i] = t1 - t0;
  }
  for (uint32_t i = 0; i < n; ++i) out[i] = lat[i];
  __threadfence_system();
  *stop = 1;
}

// The bank thrasher: chases byte offsets through its module's 64 KiB `tbank`, 64 loads
// between looks at the stop flag; counts its block on its SM first.
static const char* kBankPtx = R"(
.version 7.8
.target sm_90
.address_size 64
.const .align 4 .b32 tbank[16384];
.visible .entry thrash_bank(.param .u64 p_stop, .param .u64 p_started, .param .u64 p_onsm, .param .u64 p_sink)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.param.u64 %rd1, [p_stop];
  ld.param.u64 %rd2, [p_started];
  ld.param.u64 %rd8, [p_onsm];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd8, %rd8;
  mov.u32 %r6, %smid;
  mul.wide.u32 %rd9, %r6, 4;
  add.u64 %rd9, %rd8, %rd9;
  atom.global.add.u32 %r2, [%rd9], 1;
  atom.global.add.u32 %r2, [%rd2], 1;
  mov.u64 %rd3, %globaltimer;
  add.u64 %rd3, %rd3, 2000000000;
  mov.u32 %r3, 0;
  mov.u64 %rd4, tbank;
LOOP:
  mov.u32 %r4, 0;
INNER:
  cvt.u64.u32 %rd5, %r3;
  add.u64 %rd6, %rd4, %rd5;
  ld.const.u32 %r3, [%rd6];
  add.u32 %r4, %r4, 1;
  setp.lt.u32 %p2, %r4, 64;
  @%p2 bra INNER;
  ld.volatile.global.u32 %r5, [%rd1];
  setp.ne.u32 %p3, %r5, 0;
  @%p3 bra END;
  mov.u64 %rd7, %globaltimer;
  setp.gt.u64 %p3, %rd7, %rd3;
  @%p3 bra END;
  bra LOOP;
END:
  setp.ne.u32 %p3, %r3, 4294967295;
  @%p3 bra DONE;
  ld.param.u64 %rd10, [p_sink];
  cvta.to.global.u64 %rd10, %rd10;
  st.global.u32 [%rd10], %r3;
DONE:
  ret;
}
)";

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937_64 rng(64);
  uint32_t* d_out;
  int *d_stop, *d_started, *d_seen;
  CHECK(cudaMalloc(&d_out, MAX_NODES * 4));
  CHECK(cudaMalloc(&d_stop, 4));
  CHECK(cudaMalloc(&d_started, 4));
  CHECK(cudaMalloc(&d_seen, 4));
  int *d_onsm, *d_chaser_sm, *d_sink;
  CHECK(cudaMalloc(&d_onsm, sms * 4));
  CHECK(cudaMalloc(&d_chaser_sm, 4));
  CHECK(cudaMalloc(&d_sink, 4));
  CHECK(cudaFree(0));
  // The chaser: 64 KiB of the bank and 31 KiB of its parameters, random order.
  std::vector<uint32_t> nodes;
  for (uint32_t k = 0; k < BANK_WORDS / NODE_WORDS; ++k) nodes.push_back(k * NODE_WORDS);
  for (uint32_t k = 0; k < PARAM_WORDS / NODE_WORDS; ++k) nodes.push_back(BANK_WORDS + k * NODE_WORDS);
  std::shuffle(nodes.begin(), nodes.end(), rng);
  std::vector<uint32_t> host_bank(BANK_WORDS, 0);
  Params mine{};
  for (size_t i = 0; i < nodes.size(); ++i) {
    uint32_t from = nodes[i], to = nodes[(i + 1) % nodes.size()];
    if (from < BANK_WORDS) host_bank[from] = to; else mine.w[from - BANK_WORDS] = to;
  }
  CHECK(cudaMemcpyToSymbol(bank, host_bank.data(), BANK_WORDS * 4));
  const uint32_t n = nodes.size();
  // A thrasher's chain over `kib` KiB of its parameters (1 line when kib is 0).
  auto thrasher = [&](uint32_t kib) {
    Params q{};
    std::vector<uint32_t> t;
    const uint32_t count = kib ? kib * 1024 / 64 : 1;
    for (uint32_t k = 0; k < count; ++k) t.push_back(k * NODE_WORDS);
    std::shuffle(t.begin(), t.end(), rng);
    for (size_t i = 0; i < t.size(); ++i) q.w[t[i]] = t[(i + 1) % t.size()];
    return q;
  };
  const int kMax = 6;
  std::vector<CUmodule> mods(kMax);
  std::vector<CUfunction> fns(kMax);
  std::vector<CUdeviceptr> tbanks(kMax);
  for (int k = 0; k < kMax; ++k) {
    CK(cuModuleLoadData(&mods[k], kBankPtx));
    CK(cuModuleGetFunction(&fns[k], mods[k], "thrash_bank"));
    size_t bytes = 0;
    CK(cuModuleGetGlobal(&tbanks[k], &bytes, mods[k], "tbank"));
  }
  // A bank thrasher's chain over `kib` KiB of its bank (byte offsets; 1 line when kib is 0).
  auto fill_bank = [&](int k, uint32_t kib) {
    std::vector<uint32_t> b(BANK_WORDS, 0), t;
    const uint32_t count = kib ? kib * 1024 / 64 : 1;
    for (uint32_t i = 0; i < count; ++i) t.push_back(i * NODE_WORDS);
    std::shuffle(t.begin(), t.end(), rng);
    for (size_t i = 0; i < t.size(); ++i) b[t[i]] = t[(i + 1) % t.size()] * 4;
    CK(cuMemcpyHtoD(tbanks[k], b.data(), BANK_WORDS * 4));
  };
  std::vector<cudaStream_t> streams(kMax + 1);
  for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("kind,thrashers,thrasher_kib,footprint_kib,p5,p50,p95,share_above_1.5x_p5,started,chaser_sm,thrasher_blocks_on_it\n");
  struct Case { int bank; int t; uint32_t kib; };
  std::vector<Case> cases = {{0, 0, 0}, {0, 1, 0}, {0, 4, 0}, {0, 1, 31}, {0, 2, 31}, {0, 4, 31}, {0, 6, 31},
                             {1, 1, 0}, {1, 6, 0}, {1, 1, 16}, {1, 1, 32}, {1, 1, 64}, {1, 2, 64}, {1, 3, 64},
                             {1, 4, 64}, {1, 6, 64}};
  for (int rep = 0; rep < 2; ++rep) {
    for (auto c : cases) {
      CHECK(cudaMemset(d_stop, 0, 4));
      CHECK(cudaMemset(d_started, 0, 4));
      CHECK(cudaMemset(d_onsm, 0, sms * 4));
      if (c.bank)
        for (int k = 0; k < c.t; ++k) fill_bank(k, c.kib);
      CHECK(cudaDeviceSynchronize());
      // 4 blocks per SM for each thrasher launch: every SM holds some of each.
      const int blocks = 4 * sms;
      for (int k = 0; k < c.t; ++k) {
        if (c.bank) {
          void* args[] = {&d_stop, &d_started, &d_onsm, &d_sink};
          CK(cuLaunchKernel(fns[k], blocks, 1, 1, 32, 1, 1, 0, (CUstream)streams[k], args, nullptr));
        } else {
          Params q = thrasher(c.kib);
          thrash<<<blocks, 32, 0, streams[k]>>>(q, d_stop, d_started, d_onsm);
          CHECK(cudaGetLastError());
        }
      }
      chase<<<1, 32, 0, streams[kMax]>>>(mine, nodes[0], n, d_started, c.t * blocks, d_stop, d_out, d_seen,
                                          d_chaser_sm);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<uint32_t> lat(n);
      int seen = 0;
      CHECK(cudaMemcpy(lat.data(), d_out, n * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(&seen, d_seen, 4, cudaMemcpyDeviceToHost));
      int chaser_sm = 0;
      std::vector<int> onsm(sms);
      CHECK(cudaMemcpy(&chaser_sm, d_chaser_sm, 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(onsm.data(), d_onsm, sms * 4, cudaMemcpyDeviceToHost));
      std::sort(lat.begin(), lat.end());
      uint32_t p5 = lat[n / 20], p50 = lat[n / 2], p95 = lat[n * 19 / 20];
      size_t slow = std::count_if(lat.begin(), lat.end(), [&](uint32_t v) { return v > 1.5 * p5; });
      printf("%s,%d,%u,%u,%u,%u,%u,%.3f,%d/%d,%d,%d\n", c.bank ? "bank" : "params", c.t, c.kib, 95 + c.t * c.kib, p5,
             p50, p95, (double)slow / n, seen, c.t * blocks, chaser_sm, onsm[chaser_sm % sms]);
      fflush(stdout);
    }
  }
  return 0;
}
