"""Summarises l2_levels.cu's output (gzipped CSV): the latency histogram of the L2 path at
each array size (part L), the partition map (part M) and memory per home partition (part D).

python3 l2_levels_analysis.py out.csv.gz        (needs numpy)
Backs: the L2 level method of docs/measurement.md; the samples its tests use
(crates/pchase-runner/tests/data/l2-samples-*.txt) were cut from this probe's output.
"""
import gzip, collections, sys
import numpy as np
f=sys.argv[1]
L=collections.defaultdict(list); M=collections.defaultdict(list); D=[]
for line in gzip.open(f,'rt'):
    if line.startswith('#'): continue
    p=line.strip().split(',')
    if p[0]=='L': L[(p[1],float(p[2]))].append(int(p[5]))
    elif p[0]=='M': M[(int(p[1]),int(p[2]),int(p[3]),int(p[4]))].append(int(p[6]))
    elif p[0]=='D': D.append(tuple(map(int,p[1:])))
def hist(v, lo=200, hi=1000, w=20):
    v=np.array(v); h=np.histogram(v, bins=np.arange(lo,hi+w,w))[0]
    return ' '.join(f'{x*100/len(v):2.0f}' if x else ' .' for x in h)
print('bins 200..1000 step 20 (% of loads)')
print('                ' + ' '.join(f'{b//10:2d}' for b in range(200,1000,20)))
for k in sorted(L):
    print(f'{k[0]} {k[1]:6.1f}  ', hist(L[k]))
nsm=1+max(s for (_,_,s,_) in M)
far=[s for s in range(nsm) if (np.array(M[(0,0,s,1)])>380).mean()>0.25]
print('far SMs for ref 0:', len(far), far)
allfar=np.concatenate([np.array(M[(0,0,s,1)]) for s in far])
allnear=np.concatenate([np.array(M[(0,0,s,1)]) for s in range(nsm) if s not in far])
print('cold, other side  ', hist(allfar))
print('cold, same side   ', hist(allnear))
p2=np.concatenate([np.array(M[(0,0,s,2)]) for s in far])
print('2nd pass other sd ', hist(p2))
fl=allfar[allfar>380]; print('far level p5/p25/p50/p75/p95', np.percentile(fl,[5,25,50,75,95]))
nl=allfar[allfar<=380]; print('near part (other side) p5/p50/p95', np.percentile(nl,[5,50,95]))
print('same side p5/p50/p95', np.percentile(allnear,[5,50,95]))
# stability of map across reps
for rep,ref in sorted({(r,rf) for (r,rf,_,_) in M}):
    fr=[s for s in range(nsm) if (np.array(M[(rep,ref,s,1)])>380).mean()>0.25]
    print('rep',rep,'ref',ref,'other side:',len(fr), 'same as rep0:', set(fr)==set(far), 'complement:', set(fr)==set(range(nsm))-set(far))
# which lines are far: same across SMs on other side?
pat=[tuple((np.array(M[(0,0,s,1)])>380).astype(int)) for s in far]
print('distinct far-line patterns among other-side SMs:', len(set(pat)))
D=np.array(D)
for rep in (0,1):
    d=D[D[:,0]==rep]; farl=d[:,3]>380
    print('D rep',rep,'far frac %.3f'%farl.mean())
    print('  mem, near-homed lines', np.percentile(d[~farl,4],[5,25,50,75,95]), hist(d[~farl,4],400,1200,25))
    print('  mem, far-homed lines ', np.percentile(d[farl,4],[5,25,50,75,95]), hist(d[farl,4],400,1200,25))
print('--- per-SM far level (rep 2/3: ref on the other side of SM 0)')
for rep,ref in [(2,4),(3,66)]:
    meds=[]
    for s in range(nsm):
        v=np.array(M[(rep,ref,s,1)]); 
        if (v>380).mean()>0.25: meds.append((s,np.median(v[v>380]),np.median(v[v<=380])))
    m=np.array([x[1] for x in meds]); n=np.array([x[2] for x in meds])
    print(f'rep {rep} ref {ref}: far p50 per SM min {m.min()} max {m.max()} med {np.median(m)}; near-part p50 per SM min {n.min()} max {n.max()}')
    print('  SM0:', [x for x in meds if x[0]==0])
# sweep far mode, SM 0 seq 38 MiB
v=np.array(L[('seq',38.0)]); print('sweep 38 MiB: mode<500 p50', np.median(v[v<500]), 'mode>=500 p50', np.median(v[(v>=500)&(v<650)]), 'share<500', (v<500).mean())
v=np.array(L[('seq',90.0)]); print('sweep 90 MiB: mode<640 p50', np.median(v[v<640]), 'mode>=640 p50', np.median(v[v>=640]), 'share<640', (v<640).mean())
