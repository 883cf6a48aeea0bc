# Fits the rational function S(a) = (1 - erfcx(a)) / a that functional/erf.py uses
# (float64: degree 9/10, float32: degree 4/5) with mpmath at 45 digits. Not run in CI;
# needs `pip install mpmath`. Run: python docs/derivations/fit_erf_coefficients.py DEGREE RANGE NPTS ITERS
import mpmath as mp, sys
mp.mp.dps = 45
SQPI = mp.sqrt(mp.pi)
def erfcx(a): return mp.exp(a*a)*mp.erfc(a)
def S(a):
    if a == 0: return 2/SQPI
    return (1 - erfcx(a))/a

def fit(n, m, A, npts=300, iters=15, k=2, verbose=False):
    # nodes uniform-Chebyshev in t = k/(k+a), t in [k/(k+A), 1]
    t0 = k/(k+A)
    ts = [t0 + (1-t0)/2*(1 - mp.cos(mp.pi*(i+0.5)/npts)) for i in range(npts)]
    xs = sorted([k/t - k for t in ts])
    Ss = [S(x) for x in xs]
    ws = []
    for x in xs:
        w1 = x/erfcx(x)
        w2 = (x*mp.exp(-x*x)/mp.erf(x)) if x>0 else 2/SQPI
        ws.append(max(w1,w2))
    lw = [mp.mpf(1)/npts]*npts
    Qprev = [mp.mpf(1)]*npts
    best = None
    for it in range(iters):
        rows=[]; rhs=[]
        for i,x in enumerate(xs):
            c = ws[i]*mp.sqrt(lw[i])/abs(Qprev[i])
            row = [c*x**j for j in range(n+1)] + [-c*Ss[i]*x**j for j in range(1,m+1)]
            rows.append(row); rhs.append(c*Ss[i])
        sol, res = mp.qr_solve(mp.matrix(rows), mp.matrix(rhs))
        p = [sol[j] for j in range(n+1)]; q=[mp.mpf(1)]+[sol[n+j] for j in range(1,m+1)]
        errs=[]
        for i,x in enumerate(xs):
            P=mp.polyval(p[::-1],x); Q=mp.polyval(q[::-1],x)
            Qprev[i]=Q
            errs.append(ws[i]*abs(P/Q - Ss[i]))
        e = max(errs)
        if verbose: print(it, mp.nstr(e,4))
        if best is None or e < best[0]: best=(e,p,q)
        tot = sum(lw[i]*errs[i] for i in range(npts))
        lw = [lw[i]*errs[i]/tot for i in range(npts)]
    return best

if __name__ == "__main__":  # python docs/derivations/fit_erf_coefficients.py DEGREE RANGE NPTS ITERS, e.g. 9 6.0 300 15
    n=int(sys.argv[1]); A=float(sys.argv[2])
    e,p,q = fit(n, n+1, A, npts=int(sys.argv[3]), iters=int(sys.argv[4]))
    print("err", mp.nstr(e,5))
    json.dump({"P":[float(c) for c in p], "Q":[float(c) for c in q], "A":A}, open(f"coef_{n}.json","w"))
    print([repr(float(c)) for c in p]); print([repr(float(c)) for c in q])
