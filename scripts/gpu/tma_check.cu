// Probes: memtopo's async-copy latencies, independently of its PTX generator. Backs: the
// second method for the TMA bulk and plain copies in docs/results/h100-deep.md
// (docs/evidence/2026-11-25-h100-copy-probes/). One block copies one region per round from
// a 1 MiB (or 4 x size) source of word i = i into shared memory and thread 0 times each round with clock(), for the TMA bulk
// copy (mbarrier expect_tx / try_wait.parity), cp.async.cg 16 B (commit / wait_group 0 and a
// barrier) and plain ld.global.cg + st.shared (a barrier). Prints p5/p50/p95 cycles per size
// and checks the last word copied. memtopo subtracts its calibrated clock overhead (tens of
// cycles); this program does not. Its cp.async figure is its own loop's (one predicated
// loop for every mode); cpasync_probe.cu times that path with a kernel of its own.
// Build: nvcc -arch=sm_90 -O2 -o tma_check tma_check.cu   (sm_80: modes 1 and 2 only)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern __shared__ __align__(128) unsigned char dyn[];

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// mode 0: TMA bulk (sm_90), 1: cp.async.cg 16 B, 2: plain 16 B loads and stores.
__global__ void rounds_kernel(const unsigned char* src, unsigned bytes, unsigned regions,
                              unsigned warm, unsigned timed, int mode, unsigned* out,
                              unsigned* check) {
    const unsigned bar = shared_address(dyn);
    const unsigned slot = bar + 128;
    const unsigned tid = threadIdx.x;
#if __CUDA_ARCH__ >= 900
    if (mode == 0) {
        if (tid != 0) return;
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
#endif
    unsigned parity = 0;
    for (unsigned r = 0; r < warm + timed; ++r) {
        const unsigned char* from = src + static_cast<size_t>(r % regions) * bytes;
        if (mode != 0) __syncthreads();
        const unsigned t0 = static_cast<unsigned>(clock());
        if (mode == 0) {
#if __CUDA_ARCH__ >= 900
            uint64_t state;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                         : "=l"(state) : "r"(bar), "r"(bytes) : "memory");
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                ::"r"(slot), "l"(from), "r"(bytes), "r"(bar) : "memory");
            unsigned done = 0;
            while (!done) {
                asm volatile(
                    "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                    : "=r"(done) : "r"(bar), "r"(parity) : "memory");
            }
            parity ^= 1;
            (void)state;
#endif
        } else {
            for (unsigned off = tid * 16; off < bytes; off += blockDim.x * 16) {
                if (mode == 1) {
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                                 ::"r"(slot + off), "l"(from + off) : "memory");
                } else {
                    unsigned a, b, c, d;
                    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(from + off));
                    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                                 ::"r"(slot + off), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
                }
            }
            if (mode == 1) {
                asm volatile("cp.async.commit_group;" ::: "memory");
                asm volatile("cp.async.wait_group 0;" ::: "memory");
            }
            __syncthreads();
        }
        const unsigned t1 = static_cast<unsigned>(clock());
        if (tid == 0 && r >= warm) out[r - warm] = t1 - t0;
    }
    if (tid == 0) *check = *reinterpret_cast<const unsigned*>(dyn + 128 + bytes - 4);
}

static void fail(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::printf("FAILED %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

int main() {
    cudaDeviceProp prop{};
    fail(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    const int cc = prop.major * 10 + prop.minor;
    const unsigned max_bytes = static_cast<unsigned>((prop.sharedMemPerBlockOptin - 128) / 128 * 128);
    std::printf("%s cc %d.%d, %d SMs, %zu B shared per block (opt-in), largest copy %u B\n",
                prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                prop.sharedMemPerBlockOptin, max_bytes);
    fail(cudaFuncSetAttribute(rounds_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(max_bytes + 128)),
         "cudaFuncSetAttribute");
    const size_t span_max = std::max<size_t>(1 << 20, 4 * static_cast<size_t>(max_bytes));
    std::vector<unsigned> host(span_max / 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned>(i);
    unsigned char* src = nullptr;
    unsigned *out = nullptr, *check = nullptr;
    fail(cudaMalloc(&src, span_max), "cudaMalloc");
    fail(cudaMemcpy(src, host.data(), span_max, cudaMemcpyHostToDevice), "cudaMemcpy");
    const unsigned timed = 64;
    fail(cudaMalloc(&out, timed * sizeof(unsigned)), "cudaMalloc");
    fail(cudaMalloc(&check, sizeof(unsigned)), "cudaMalloc");
    const char* names[3] = {"bulk", "cp_async_cg_16", "plain_v16"};
    std::vector<unsigned> sizes;
    for (unsigned b = 128; b <= max_bytes; b *= 2) sizes.push_back(b);
    if (sizes.back() != max_bytes) sizes.push_back(max_bytes);
    std::printf("%-16s %8s %6s %6s %6s  %s\n", "path", "bytes", "p5", "p50", "p95", "check");
    for (int mode = (cc >= 90 ? 0 : 1); mode < 3; ++mode) {
        for (unsigned bytes : sizes) {
            const size_t span = std::max<size_t>(1 << 20, 4 * static_cast<size_t>(bytes));
            const unsigned regions = static_cast<unsigned>(span / bytes);
            const unsigned threads = mode == 0 ? 32 : 256;
            rounds_kernel<<<1, threads, bytes + 128>>>(src, bytes, regions, regions, timed, mode,
                                                      out, check);
            fail(cudaDeviceSynchronize(), names[mode]);
            std::vector<unsigned> cycles(timed);
            unsigned got = 0;
            fail(cudaMemcpy(cycles.data(), out, timed * sizeof(unsigned), cudaMemcpyDeviceToHost), "copy back");
            fail(cudaMemcpy(&got, check, sizeof(unsigned), cudaMemcpyDeviceToHost), "copy back");
            std::sort(cycles.begin(), cycles.end());
            const unsigned last = (regions + timed - 1) % regions;
            const unsigned want = static_cast<unsigned>((static_cast<size_t>(last) + 1) * bytes / 4 - 1);
            auto rank = [&](double q) {
                size_t i = static_cast<size_t>(q * timed + 0.999999);
                return cycles[std::min<size_t>(std::max<size_t>(i, 1), timed) - 1];
            };
            std::printf("%-16s %8u %6u %6u %6u  %s\n", names[mode], bytes, rank(0.05), rank(0.5),
                        rank(0.95), got == want ? "ok" : "WRONG");
        }
    }
    return 0;
}
