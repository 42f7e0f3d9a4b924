"""Fixed grids of argument combinations compared with numpy: keyword forms, negative/tuple axes,
modes, edge positions, empty sections (exceptions must match numpy's types).

Each test walks one grid and reports every mismatch at once. Tolerance: rtol/atol 1e-5.
"""
from __future__ import annotations

import warnings

import numpy as np

import mnnjit.numpy as m


class _Grid:
    def __init__(self):
        self.failures = []

    def __call__(self, name, f, g):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = f()
            except Exception as exc:  # noqa: BLE001 - comparing exception types with numpy's
                want = exc
            try:
                got = g()
                got = _read(got)
            except Exception as exc:  # noqa: BLE001
                got = exc
        if not _equal(want, got):
            self.failures.append(f"{name}: numpy {_desc(want)} mnnjit {_desc(got)}")

    def check(self):
        assert not self.failures, f"{len(self.failures)} mismatches:\n" + "\n".join(self.failures[:20])


def _read(x):
    if isinstance(x, (list, tuple)):
        return [_read(v) for v in x]
    return x.read() if hasattr(x, "read") else x


def _desc(x):
    if isinstance(x, Exception):
        return type(x).__name__
    if isinstance(x, (list, tuple)):
        return f"[{len(x)} items]"
    return f"shape {np.shape(x)}"


def _equal(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return isinstance(a, Exception) and isinstance(b, Exception) and (isinstance(a, type(b)) or isinstance(b, type(a)))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a.astype(float), b.astype(float), equal_nan=True, rtol=1e-5, atol=1e-5)


def test_shape_and_statistics_grid():
    cmp = _Grid()
    A=[np.arange(6,dtype=np.float32).reshape(2,3), np.arange(24,dtype=np.float32).reshape(2,3,4), np.arange(5,dtype=np.int32)]
    for a in A:
        nd=a.ndim
        for sh,ax in [(1,None),(2,0),((1,2),(0,-1)),((1,),(0,)),(-3,-1),((1,1),(0,0)),(1,(0,1)),((1,2),0)]:
            cmp(f'roll{a.shape}{sh}{ax}', lambda: np.roll(a,sh,ax), lambda: m.roll(a,sh,ax))
        for k in range(-2,5):
            for axes in [(0,1),(1,0),(0,-1),(-1,0),(0,0),(0,2)]:
                cmp(f'rot90{a.shape}{k}{axes}', lambda: np.rot90(a,k,axes), lambda: m.rot90(a,k,axes))
        for ax in [0,-1,(0,1),(0,-1),(nd,),(0,0),(-nd-1,)]:
            cmp(f'expand_dims{a.shape}{ax}', lambda: np.expand_dims(a,ax), lambda: m.expand_dims(a,ax))
        for sec in [1,2,3,[1],[1,3],[-1],[0,10],[3,1],[]]:
            for ax in range(nd):
                cmp(f'array_split{a.shape}{sec}{ax}', lambda: np.array_split(a,sec,ax), lambda: m.array_split(a,sec,ax))
                cmp(f'split{a.shape}{sec}{ax}', lambda: np.split(a,sec,ax), lambda: m.split(a,sec,ax))
        for mode in ['constant','edge','reflect','symmetric','wrap','maximum','minimum','mean','median','linear_ramp','empty']:
            for w in [1,(1,2),[(0,1)]*nd,((3,0),)*nd, 0, [[1,1]]]:
                if mode=='empty':
                    continue
                cmp(f'pad{a.shape}{mode}{w}', lambda: np.pad(a,w,mode), lambda: m.pad(a,w,mode))
        for n_ in [0,1,2,5]:
            for ax in range(-nd,nd):
                cmp(f'diff{a.shape}{n_}{ax}', lambda: np.diff(a,n_,ax), lambda: m.diff(a,n_,ax))
                cmp(f'diffpa{a.shape}{n_}{ax}', lambda: np.diff(a,n_,ax,prepend=0,append=9), lambda: m.diff(a,n_,ax,prepend=0,append=9))
        cmp(f'gradient{a.shape}', lambda: np.gradient(a), lambda: m.gradient(a))
        cmp(f'gradient2{a.shape}', lambda: np.gradient(a, 2.0), lambda: m.gradient(a, 2.0))
        for ax in range(nd):
            for mode in ['raise','wrap','clip']:
                cmp(f'take{a.shape}{ax}{mode}', lambda: np.take(a,[0,-1,7],ax,mode=mode), lambda: m.take(a,[0,-1,7],ax,mode=mode))
        for ax in [None,0,-1,(0,),(0,-1)]:
            for q in [50,[10,90],[[25]]]:
                for meth in ['linear','lower','higher','nearest','midpoint']:
                    cmp(f'percentile{a.shape}{ax}{q}{meth}', lambda: np.percentile(a,q,ax,method=meth), lambda: m.percentile(a,q,ax,method=meth))
                    if not (isinstance(ax, tuple) and np.ndim(q) > 1):  # numpy's nanpercentile mis-shapes this case
                        cmp(f'nanpercentile{a.shape}{ax}{q}{meth}', lambda: np.nanpercentile(a,q,ax,method=meth), lambda: m.nanpercentile(a,q,ax,method=meth))
        for src,dst in [(0,-1),([0],[1]),((0,-1),(-1,0)),(0,0)]:
            cmp(f'moveaxis{a.shape}{src}{dst}', lambda: np.moveaxis(a,src,dst), lambda: m.moveaxis(a,src,dst))
        for ax in [None,0,-1,(0,),(0,1)]:
            cmp(f'flip{a.shape}{ax}', lambda: np.flip(a,ax), lambda: m.flip(a,ax))
            cmp(f'squeeze{a.shape}{ax}', lambda: np.squeeze(a[None],ax), lambda: m.squeeze(a[None],ax))
            cmp(f'count_nonzero{a.shape}{ax}', lambda: np.count_nonzero(a,ax), lambda: m.count_nonzero(a,ax))
            if not isinstance(ax, tuple):  # numpy raises TypeError or ValueError for tuples, by shape
                cmp(f'unique{a.shape}{ax}', lambda: np.unique(a%3,axis=ax), lambda: m.unique(a%3,axis=ax))
        for reps in [2,(2,1),(1,1,2),0,(0,2)]:
            cmp(f'tile{a.shape}{reps}', lambda: np.tile(a,reps), lambda: m.tile(a,reps))

    cmp.check()


def test_creation_products_misc_grid():
    cmp = _Grid()
    for args in [(5,),(1,5),(5,1,-1),(0,1,0.1),(-3,3,0.5),(2.5,),(1,2,0.3),(10,0,-3),(0,0)]:
        cmp(f'arange{args}', lambda: np.arange(*args), lambda: m.arange(*args))
    cmp('arange dtype', lambda: np.arange(5, dtype=np.float32), lambda: m.arange(5, dtype=np.float32))
    for num in [0,1,2,7]:
        for ep in [True, False]:
            cmp(f'linspace{num}{ep}', lambda: np.linspace(-1,3,num,endpoint=ep), lambda: m.linspace(-1,3,num,endpoint=ep))
            cmp(f'linspace_arr{num}{ep}', lambda: np.linspace([0,1],[2,5],num,endpoint=ep,axis=1), lambda: m.linspace(m.array([0,1]),[2,5],num,endpoint=ep,axis=1))
            cmp(f'logspace{num}{ep}', lambda: np.logspace(0,2,num,endpoint=ep,base=2), lambda: m.logspace(0,2,num,endpoint=ep,base=2))
    cmp('linspace retstep', lambda: np.linspace(0,1,5,retstep=True), lambda: m.linspace(0,1,5,retstep=True))
    for n_,mm,k in [(3,None,0),(3,4,1),(3,2,-1),(2,2,5),(0,0,0)]:
        cmp(f'eye{n_}{mm}{k}', lambda: np.eye(n_,mm,k,dtype=np.float32), lambda: m.eye(n_,mm,k))
        cmp(f'tri{n_}{mm}{k}', lambda: np.tri(n_,mm,k,dtype=np.float32), lambda: m.tri(n_,mm,k))
    cmp('full arr', lambda: np.full((2,3),[1,2,3]), lambda: m.full((2,3),[1,2,3]))
    shp=[(),(3,),(2,3),(3,2),(2,2,3),(4,3,2)]
    for sa in shp:
        for sb in shp:
            a=np.arange(int(np.prod(sa)),dtype=np.float32).reshape(sa)+1; b=np.arange(int(np.prod(sb)),dtype=np.float32).reshape(sb)-2
            for f in ['dot','matmul','inner','outer','vdot','kron' if hasattr(m,'kron') else 'outer']:
                cmp(f'{f}{sa}{sb}', lambda: getattr(np,f)(a,b), lambda: getattr(m,f)(a,b))
            for axes in [0,1,2]:
                cmp(f'tensordot{sa}{sb}{axes}', lambda: np.tensordot(a,b,axes), lambda: m.tensordot(a,b,axes))
    for sa,sb,kw in [((3,),(3,),{}),((2,),(3,),{}),((2,3),(2,3),{}),((3,2),(3,2),{'axisa':0,'axisb':0}),((2,3),(3,),{'axisc':0}),((4,3),(1,3),{}),((2,2),(2,2),{})]:
        a=np.arange(int(np.prod(sa)),dtype=np.float32).reshape(sa)+1; b=(np.arange(int(np.prod(sb)),dtype=np.float32).reshape(sb)-2)**2
        cmp(f'cross{sa}{sb}{kw}', lambda: np.cross(a,b,**kw), lambda: m.cross(a,b,**kw))
    M=np.arange(24,dtype=np.float32).reshape(2,3,4)-7
    for o in [None,1,2,np.inf,-np.inf,'fro','nuc',-1,-2,0,3]:
        for ax in [None,0,-1,(0,1),(1,2),(2,0)]:
            for kd in [False,True]:
                cmp(f'norm{o}{ax}{kd}', lambda: np.float32(np.linalg.norm(M,o,ax,kd)) if np.ndim(np.linalg.norm(M,o,ax,kd))==0 else np.linalg.norm(M,o,ax,kd), lambda: m.linalg.norm(M,o,ax,kd))
    cmp('searchsorted sorter', lambda: np.searchsorted([3,1,2],[2,5],sorter=[1,2,0]), lambda: m.searchsorted([3,1,2],[2,5],sorter=[1,2,0]))
    k2=np.array([[1,0,1,0],[2,2,1,1]]); 
    cmp('lexsort2d', lambda: np.lexsort(k2), lambda: m.lexsort(k2))
    k3=np.array([[[1,0],[1,0]],[[2,2],[1,1]]])
    for ax in [0,1,-1]:
        cmp(f'lexsort3d{ax}', lambda: np.lexsort(k3,axis=ax), lambda: m.lexsort(k3,axis=ax))
    x=np.array([0.5,1.5,2.5,-1,10,2.0],np.float32)
    for bins in [1,3,[0,1,2],[0,1,1,2]]:
        for rng in [None,(0,3),(1,1)]:
            for dens in [False,True]:
                cmp(f'hist{bins}{rng}{dens}', lambda: np.histogram(x,bins,rng,density=dens), lambda: m.histogram(x,bins,rng,density=dens))
    cmp('hist weights', lambda: np.histogram(x,3,weights=x), lambda: m.histogram(x,3,weights=x))
    cmp('hist int', lambda: np.histogram(np.arange(10),4), lambda: m.histogram(np.arange(10),4))
    cmp('hist empty', lambda: np.histogram(np.zeros(0),4), lambda: m.histogram(np.zeros(0),4))
    for per in [None, 4.0]:
        cmp(f'interp{per}', lambda: np.interp(x,[0,1,2],[5,6,9],period=per), lambda: m.interp(x,[0,1,2],[5,6,9],period=per))
    cmp('interp lr', lambda: np.interp(x,[0,1,2],[5,6,9],left=-1,right=-2), lambda: m.interp(x,[0,1,2],[5,6,9],left=-1,right=-2))
    for mode in ['full','same','valid']:
        cmp(f'convolve int {mode}', lambda: np.convolve([1,2,3],[0,1,0.5],mode), lambda: m.convolve([1,2,3],[0,1,0.5],mode))
        cmp(f'correlate {mode}', lambda: np.correlate([1,2,3,4],[0,1],mode), lambda: m.correlate([1,2,3,4],[0,1],mode))
    X=np.array([[1,2,4,7],[0,1,0,3]],np.float32)
    cmp('cov y', lambda: np.cov(X[0],X[1]), lambda: m.cov(X[0],X[1]))
    cmp('cov 1d', lambda: np.cov(X[0]), lambda: m.cov(X[0]))
    cmp('cov fw', lambda: np.cov(X,fweights=[1,2,1,1]), lambda: m.cov(X,fweights=[1,2,1,1]))
    cmp('cov bias', lambda: np.cov(X,bias=True), lambda: m.cov(X,bias=True))
    cmp('corrcoef y', lambda: np.corrcoef(X[0],X[1]), lambda: m.corrcoef(X[0],X[1]))
    cmp('corrcoef 1d', lambda: np.corrcoef(X[0]), lambda: m.corrcoef(X[0]))
    cmp('take_along None', lambda: np.take_along_axis(X,np.array([0,5]),None), lambda: m.take_along_axis(X,np.array([0,5]),None))
    for f in ['unique']:
        for flags in [(True,True,True),(False,True,False)]:
            cmp(f'unique axis1 {flags}', lambda: np.unique(np.array([[1,1,0],[1,1,0]]),*flags,axis=1), lambda: m.unique(np.array([[1,1,0],[1,1,0]]),*flags,axis=1))
    cmp('digitize dec', lambda: np.digitize(x,[3,2,1]), lambda: m.digitize(x,[3,2,1]))
    cmp('bincount', lambda: np.bincount([0,3,3],minlength=2), lambda: m.bincount([0,3,3],minlength=2))
    cmp('trapz x', lambda: np.trapezoid(X,[0,1,3,4]), lambda: m.trapz(X,[0,1,3,4]))
    cmp('trapz x2d', lambda: np.trapezoid(X,X,axis=1), lambda: m.trapz(X,X,axis=1))
    cmp('gradient varargs', lambda: np.gradient(X,2.0,[0,1,3,4]), lambda: m.gradient(X,2.0,[0,1,3,4]))
    cmp('gradient axis', lambda: np.gradient(X,axis=(0,1)), lambda: m.gradient(X,axis=(0,1)))
    cmp('ediff1d', lambda: np.ediff1d(X,to_begin=5), lambda: m.ediff1d(X,to_begin=5))
    cmp('vander', lambda: np.vander([1,2,3]), lambda: m.vander([1,2,3]))
    cmp('select', lambda: np.select([X>2,X<1],[X,-X]), lambda: m.select([X>2,X<1],[X,-X]))
    cmp('choose wrap', lambda: np.choose([0,3,-1],[[1,2,3],[4,5,6]],mode='wrap'), lambda: m.choose([0,3,-1],[[1,2,3],[4,5,6]],mode='wrap'))
    cmp('choose clip', lambda: np.choose([0,3,-1],[[1,2,3],[4,5,6]],mode='clip'), lambda: m.choose([0,3,-1],[[1,2,3],[4,5,6]],mode='clip'))
    cmp('choose raise', lambda: np.choose([0,3],[[1,2],[4,5]]), lambda: m.choose([0,3],[[1,2],[4,5]]))
    cmp('ravel_multi_index wrap', lambda: np.ravel_multi_index(([0,5],[1,-1]),(3,4),mode='wrap'), lambda: m.ravel_multi_index(([0,5],[1,-1]),(3,4),mode='wrap'))
    cmp('packbits little', lambda: np.packbits([1,0,1,1,0,0,0,0,1],bitorder='little'), lambda: m.packbits([1,0,1,1,0,0,0,0,1],bitorder='little'))
    cmp('unpackbits axis', lambda: np.unpackbits(np.array([[3,4]],np.uint8),axis=1), lambda: m.unpackbits(np.array([[3,4]],np.uint8),axis=1))
    cmp('resize', lambda: np.resize(np.array([1,2,3]),(2,4)), lambda: m.resize(np.array([1,2,3]),(2,4)))
    cmp('block1d', lambda: np.block([np.array([1,2]),np.array([3])]), lambda: m.block([np.array([1,2]),np.array([3])]))
    cmp('block3', lambda: np.block([[[np.ones((1,1,2))]],[[np.zeros((1,1,2))]]]), lambda: m.block([[[np.ones((1,1,2))]],[[np.zeros((1,1,2))]]]))
    cmp('meshgrid3', lambda: np.meshgrid([1,2],[3,4,5],[6]), lambda: m.meshgrid([1,2],[3,4,5],[6]))
    cmp('diag_indices_from', lambda: np.diag_indices_from(np.ones((3,3))), lambda: m.diag_indices_from(np.ones((3,3))))
    cmp('tril_indices_from', lambda: np.tril_indices_from(np.ones((3,4)),1), lambda: m.tril_indices_from(np.ones((3,4)),1))
    cmp('atleast multi', lambda: np.atleast_2d(1,[1,2]), lambda: m.atleast_2d(1,[1,2]))
    cmp('around neg', lambda: np.array([1234.5,-1251.0],np.float32).round(-2), lambda: m.around(np.array([1234.5,-1251.0],np.float32),-2))
    cmp('around int neg', lambda: np.around(np.array([1234,-1251]),-2), lambda: m.around(np.array([1234,-1251]),-2))
    cmp('clip int float bounds', lambda: np.clip(np.array([1,5,9]),2.5,6), lambda: m.clip(np.array([1,5,9]),2.5,6))
    cmp('clip none', lambda: np.clip(np.array([1,5,9]),None,6), lambda: m.clip(np.array([1,5,9]),None,6))
    cmp('clip inverted', lambda: np.clip(np.array([1,5,9]),6,2), lambda: m.clip(np.array([1,5,9]),6,2))
    cmp('nan_to_num', lambda: np.nan_to_num(np.array([np.nan,np.inf,-np.inf,1],np.float32)), lambda: m.nan_to_num(np.array([np.nan,np.inf,-np.inf,1],np.float32)))
    cmp('unwrap', lambda: np.unwrap(np.array([0,3,6.5,-3,9],np.float32)), lambda: m.unwrap(np.array([0,3,6.5,-3,9],np.float32)))
    cmp('unwrap period', lambda: np.unwrap(np.array([0,3,6.5,-3,9],np.float32), period=4), lambda: m.unwrap(np.array([0,3,6.5,-3,9],np.float32), period=4))
    cmp('heaviside nan', lambda: np.heaviside(np.array([np.nan,0,-1,2],np.float32),0.5), lambda: m.heaviside(np.array([np.nan,0,-1,2],np.float32),0.5))

    cmp.check()
