// Probe: the constant L1.5 past the 64 KiB of one constant bank. A kernel reads two constant
// banks: its module's `__constant__` array (64 KiB, bank 3) and its own parameters, which a
// `__grid_constant__` struct of 31 KiB puts in bank 0 and which dynamic indexing reads with
// the same constant loads (the SASS is checked for LDC and for no local-memory copy). One
// thread chases a cyclic chain over nodes 64 B apart (one constant-L1 line each) in random
// order across both banks, three untimed passes then one timed, every load timed: while the
// footprint fits the L1.5 every load is an L1.5 hit; past it, misses (to the L2) appear.
// Prints `footprint_kib,p5,p50,p95,share_above_1.5x_p5` per footprint.
//   nvcc -O2 -arch=sm_90 -o cbanks scripts/gpu/constant_banks.cu && ./cbanks
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)

constexpr uint32_t BANK_WORDS = 16384;  // 64 KiB
constexpr uint32_t PARAM_WORDS = 7936;  // 31 KiB of the 32,764 B a kernel's parameters may take
constexpr uint32_t NODE_WORDS = 16;     // 64 B
constexpr uint32_t MAX_NODES = (BANK_WORDS + PARAM_WORDS) / NODE_WORDS;

__constant__ uint32_t bank[BANK_WORDS];
struct Params { uint32_t w[PARAM_WORDS]; };

__device__ __forceinline__ uint32_t clk() { uint32_t t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory"); return t; }

// Word j < BANK_WORDS is bank[j], else p.w[j - BANK_WORDS].
__global__ void chase(const __grid_constant__ Params p, uint32_t start, uint32_t n, uint32_t* out) {
  __shared__ uint32_t lat[MAX_NODES];
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0) return;
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
}

int main() {
  std::mt19937_64 rng(64);
  uint32_t* d_out;
  CHECK(cudaMalloc(&d_out, MAX_NODES * 4));
  // Footprints: bank only (16 to 64 KiB), then the bank plus 8 to 31 KiB of parameters, and
  // the parameters alone.
  struct Case { uint32_t bank_kib, param_kib; };
  std::vector<Case> cases = {{16, 0}, {32, 0}, {48, 0}, {64, 0}, {64, 8}, {64, 16}, {64, 24}, {64, 31}, {0, 31}, {32, 31}};
  for (auto c : cases) {
    std::vector<uint32_t> nodes;  // word offsets in the combined space
    for (uint32_t k = 0; k < c.bank_kib * 1024 / 64; ++k) nodes.push_back(k * NODE_WORDS);
    for (uint32_t k = 0; k < c.param_kib * 1024 / 64; ++k) nodes.push_back(BANK_WORDS + k * NODE_WORDS);
    std::shuffle(nodes.begin(), nodes.end(), rng);
    std::vector<uint32_t> host_bank(BANK_WORDS, 0);
    Params params{};
    for (size_t i = 0; i < nodes.size(); ++i) {
      uint32_t from = nodes[i], to = nodes[(i + 1) % nodes.size()];
      if (from < BANK_WORDS) host_bank[from] = to; else params.w[from - BANK_WORDS] = to;
    }
    CHECK(cudaMemcpyToSymbol(bank, host_bank.data(), BANK_WORDS * 4));
    uint32_t n = nodes.size();
    chase<<<1, 32>>>(params, nodes[0], n, d_out);
    CHECK(cudaGetLastError());
    std::vector<uint32_t> lat(n);
    CHECK(cudaMemcpy(lat.data(), d_out, n * 4, cudaMemcpyDeviceToHost));
    std::sort(lat.begin(), lat.end());
    uint32_t p5 = lat[n / 20], p50 = lat[n / 2], p95 = lat[n * 19 / 20];
    size_t slow = std::count_if(lat.begin(), lat.end(), [&](uint32_t v) { return v > 1.5 * p5; });
    printf("%u+%u KiB,%u,%u,%u,%.3f\n", c.bank_kib, c.param_kib, p5, p50, p95, (double)slow / n);
  }
  return 0;
}
